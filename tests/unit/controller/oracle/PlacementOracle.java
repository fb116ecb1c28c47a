// Asks Kafka's own StripedReplicaPlacer where partitions go, for tests/unit/controller/kafka_placements.txt.
// Build and run against Kafka's jars (one line in per case, one line out):
//   CP=$(ls $KAFKALIKE_AK_LIB/*.jar | tr '\n' ':')
//   javac -d /tmp/oracle -cp "$CP" PlacementOracle.java
//   java -cp "$CP:/tmp/oracle" PlacementOracle < cases.txt
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Optional;
import java.util.Random;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.metadata.placement.ClusterDescriber;
import org.apache.kafka.metadata.placement.PartitionAssignment;
import org.apache.kafka.metadata.placement.PlacementSpec;
import org.apache.kafka.metadata.placement.StripedReplicaPlacer;
import org.apache.kafka.metadata.placement.TopicAssignment;
import org.apache.kafka.metadata.placement.UsableBroker;

/** Reads "seed partitions factor id:rack:fenced,..." lines (rack "-" for none), prints each
 *  placement as "r1 r2;r1 r2;..." or "ERROR message", one line per input line. */
public class PlacementOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            long seed = Long.parseLong(parts[0]);
            int partitions = Integer.parseInt(parts[1]);
            short factor = Short.parseShort(parts[2]);
            List<UsableBroker> brokers = new ArrayList<>();
            if (parts.length > 3) {
                for (String b : parts[3].split(",")) {
                    String[] f = b.split(":");
                    brokers.add(new UsableBroker(Integer.parseInt(f[0]),
                        f[1].equals("-") ? Optional.empty() : Optional.of(f[1]), f[2].equals("1")));
                }
            }
            ClusterDescriber cluster = new ClusterDescriber() {
                public Iterator<UsableBroker> usableBrokers() { return brokers.iterator(); }
                public Uuid defaultDir(int brokerId) { return Uuid.ZERO_UUID; }
            };
            try {
                TopicAssignment placed = new StripedReplicaPlacer(new Random(seed))
                    .place(new PlacementSpec(0, partitions, factor), cluster);
                StringBuilder out = new StringBuilder();
                for (PartitionAssignment p : placed.assignments()) {
                    if (out.length() > 0) out.append(';');
                    StringBuilder r = new StringBuilder();
                    for (int id : p.replicas()) { if (r.length() > 0) r.append(' '); r.append(id); }
                    out.append(r);
                }
                System.out.println(out);
            } catch (Exception e) {
                System.out.println("ERROR " + e.getMessage());
            }
        }
    }
}
