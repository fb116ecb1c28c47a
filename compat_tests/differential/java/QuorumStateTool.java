// Apache Kafka's own quorum-state store, for comparing our quorum-state files with it:
//   java -cp 'LIB/*' QuorumStateTool.java write FILE KRAFT_VERSION EPOCH LEADER_ID VOTED_ID VOTED_DIRECTORY_ID
//   java -cp 'LIB/*' QuorumStateTool.java read FILE
// (-1 for no leader or no vote; "-" for no directory id). read prints
// "epoch=E leader=L voted=V directory=D" or the exception Kafka raised.

import java.io.File;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.raft.ElectionState;
import org.apache.kafka.raft.FileQuorumStateStore;
import org.apache.kafka.raft.ReplicaKey;
import org.apache.kafka.server.common.KRaftVersion;

public class QuorumStateTool {
    public static void main(String[] args) {
        FileQuorumStateStore store = new FileQuorumStateStore(new File(args[1]));
        if (args[0].equals("write")) {
            KRaftVersion kraftVersion = KRaftVersion.fromFeatureLevel(Short.parseShort(args[2]));
            int epoch = Integer.parseInt(args[3]);
            int leaderId = Integer.parseInt(args[4]);
            int votedId = Integer.parseInt(args[5]);
            Uuid directory = args[6].equals("-") ? ReplicaKey.NO_DIRECTORY_ID : Uuid.fromString(args[6]);
            Optional<ReplicaKey> voted = votedId < 0 ? Optional.empty() : Optional.of(ReplicaKey.of(votedId, directory));
            OptionalInt leader = leaderId < 0 ? OptionalInt.empty() : OptionalInt.of(leaderId);
            ElectionState state = leader.isPresent()
                ? ElectionState.withElectedLeader(epoch, leaderId, voted, Set.of())
                : voted.isPresent()
                    ? ElectionState.withVotedCandidate(epoch, voted.get(), Set.of())
                    : ElectionState.withUnknownLeader(epoch, Set.of());
            store.writeElectionState(state, kraftVersion);
            return;
        }
        try {
            ElectionState state = store.readElectionState().orElseThrow();
            String directory = state.optionalVotedKey()
                .flatMap(ReplicaKey::directoryId)
                .map(Uuid::toString)
                .orElse("-");
            int voted = state.optionalVotedKey().map(ReplicaKey::id).orElse(-1);
            System.out.println("epoch=" + state.epoch() + " leader=" + state.leaderIdOrSentinel()
                + " voted=" + voted + " directory=" + directory);
        } catch (RuntimeException e) {
            System.out.println("error " + e);
        }
    }
}
