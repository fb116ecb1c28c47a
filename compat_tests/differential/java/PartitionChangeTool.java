// Apache Kafka's own PartitionChangeBuilder, for comparing our partition changes with it:
//   java -cp 'LIB/*' PartitionChangeTool.java < scenarios
// One scenario a line, space-separated fields (lists comma-separated, "-" for empty):
//   MV MIN_ISR ELR(0|1) ELECTION REPLICAS ISR ELR LAST_KNOWN_ELR LEADER LEADER_RECOVERY_STATE
//   ACCEPTABLE TARGET_ISR UNCLEAN_SHUTDOWN [ADDING REMOVING TARGET_REPLICAS TARGET_ADDING TARGET_REMOVING]
// (the optional reassignment fields: the registration's adding and removing replicas, then the
// change's targets, "=" for one left as the registration has it)
// prints one line each: "none", "error <message>", or
//   "version=V leader=L isr=... elr=... lke=... lrs=N" (lists as [1, 2] or null), with the
//   reassignment fields " replicas=... adding=... removing=... dirs=N" (N: how many, or null).
// Whether ELR is enabled is a constructor argument since 4.1 (4.0: setEligibleLeaderReplicasEnabled):
// both are reached by reflection, so one source compiles against 4.0 and 4.4 jars.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.function.IntPredicate;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.common.DirectoryId;
import org.apache.kafka.controller.PartitionChangeBuilder;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

public class PartitionChangeTool {
    static int[] ints(String field) {
        if (field.equals("-")) return new int[0];
        return Arrays.stream(field.split(",")).mapToInt(Integer::parseInt).toArray();
    }

    static List<Integer> list(String field) {
        List<Integer> out = new ArrayList<>();
        for (int i : ints(field)) out.add(i);
        return out;
    }

    static PartitionChangeBuilder builder(PartitionRegistration partition, Uuid topicId, IntPredicate acceptable,
                                          MetadataVersion mv, int minIsr, boolean elr) throws Exception {
        for (Constructor<?> c : PartitionChangeBuilder.class.getConstructors()) {
            if (c.getParameterCount() == 7) {
                return (PartitionChangeBuilder) c.newInstance(partition, topicId, 0, acceptable, mv, minIsr, elr);
            }
        }
        PartitionChangeBuilder b = PartitionChangeBuilder.class
            .getConstructor(PartitionRegistration.class, Uuid.class, int.class, IntPredicate.class,
                            MetadataVersion.class, int.class)
            .newInstance(partition, topicId, 0, acceptable, mv, minIsr);
        PartitionChangeBuilder.class.getMethod("setEligibleLeaderReplicasEnabled", boolean.class).invoke(b, elr);
        return b;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Uuid topicId = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAcA");
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            try {
                MetadataVersion mv = MetadataVersion.fromFeatureLevel(Short.parseShort(f[0]));
                int minIsr = Integer.parseInt(f[1]);
                boolean elr = f[2].equals("1");
                PartitionChangeBuilder.Election election = PartitionChangeBuilder.Election.valueOf(f[3]);
                int[] replicas = ints(f[4]);
                Uuid[] directories = new Uuid[replicas.length];
                Arrays.fill(directories, DirectoryId.UNASSIGNED);
                boolean moving = f.length > 13;
                PartitionRegistration partition = new PartitionRegistration.Builder()
                    .setAddingReplicas(moving ? ints(f[13]) : new int[0])
                    .setRemovingReplicas(moving ? ints(f[14]) : new int[0])
                    .setReplicas(replicas)
                    .setDirectories(directories)
                    .setIsr(ints(f[5]))
                    .setElr(ints(f[6]))
                    .setLastKnownElr(ints(f[7]))
                    .setLeader(Integer.parseInt(f[8]))
                    .setLeaderRecoveryState(LeaderRecoveryState.of(Byte.parseByte(f[9])))
                    .setLeaderEpoch(3)
                    .setPartitionEpoch(5)
                    .build();
                List<Integer> acceptable = list(f[10]);
                PartitionChangeBuilder builder = builder(partition, topicId, acceptable::contains, mv, minIsr, elr);
                builder.setElection(election);
                builder.setTargetIsr(list(f[11]));
                if (!f[12].equals("-")) builder.setUncleanShutdownReplicas(list(f[12]));
                builder.setDefaultDirProvider(uuid -> DirectoryId.UNASSIGNED);
                if (moving && !f[15].equals("=")) builder.setTargetReplicas(list(f[15]));
                if (moving && !f[16].equals("=")) builder.setTargetAdding(list(f[16]));
                if (moving && !f[17].equals("=")) builder.setTargetRemoving(list(f[17]));
                Optional<ApiMessageAndVersion> built = builder.build();
                if (built.isEmpty()) {
                    System.out.println("none");
                    continue;
                }
                PartitionChangeRecord r = (PartitionChangeRecord) built.get().message();
                System.out.println("version=" + built.get().version() + " leader=" + r.leader() + " isr=" + r.isr()
                    + " elr=" + r.eligibleLeaderReplicas() + " lke=" + r.lastKnownElr()
                    + " lrs=" + r.leaderRecoveryState()
                    + (moving ? " replicas=" + r.replicas() + " adding=" + r.addingReplicas()
                        + " removing=" + r.removingReplicas()
                        + " dirs=" + (r.directories() == null ? "null" : r.directories().size()) : ""));
            } catch (Exception e) {
                System.out.println("error " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
    }
}
