// Apache Kafka's own TimelineHashMap, for comparing the order the controller visits topics in:
//   java -cp 'LIB/*' TimelineOrderTool.java < operations
// One map a line: space-separated "put:MSB:LSB" / "rm:MSB:LSB" (Uuid halves in hex); prints the
// map's keys in iteration order, the same way. LogContext moved to common.utils.internals in 4.1+:
// it is looked up by name, so one source compiles against 4.0 and 4.4 jars.

import java.io.*;
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.timeline.SnapshotRegistry;
import org.apache.kafka.timeline.TimelineHashMap;

public class TimelineOrderTool {
    static Object logContext() throws Exception {
        for (String name : new String[] {"org.apache.kafka.common.utils.internals.LogContext",
                                         "org.apache.kafka.common.utils.LogContext"}) {
            try {
                return Class.forName(name).getConstructor().newInstance();
            } catch (ClassNotFoundException e) {
                // the other release's name
            }
        }
        throw new IllegalStateException("no LogContext class in the jars");
    }

    static SnapshotRegistry registry() throws Exception {
        Object context = logContext();
        return (SnapshotRegistry) SnapshotRegistry.class.getConstructor(context.getClass()).newInstance(context);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            TimelineHashMap<Uuid, Integer> map = new TimelineHashMap<>(registry(), 0);
            for (String op : line.trim().split(" ")) {
                String[] kv = op.split(":");
                Uuid id = new Uuid(Long.parseUnsignedLong(kv[1], 16), Long.parseUnsignedLong(kv[2], 16));
                if (kv[0].equals("put")) map.put(id, 1); else map.remove(id);
            }
            StringBuilder out = new StringBuilder();
            for (Map.Entry<Uuid, Integer> e : map.entrySet()) {
                out.append(Long.toHexString(e.getKey().getMostSignificantBits())).append(":")
                   .append(Long.toHexString(e.getKey().getLeastSignificantBits())).append(" ");
            }
            System.out.println(out.toString().trim());
        }
    }
}
