// Asks Kafka's own ReplicationControlManager what AlterPartition, ElectLeaders, fencing and the
// periodic unclean / preferred election passes do, for tests/unit/controller/kafka_partition_control.txt.
// In Kafka's controller package: its managers' builders are package-private.
// Build and run against Kafka's jars (one case per line in, one answer per line out):
//   CP=$(ls $KAFKALIKE_AK_LIB/*.jar | tr '\n' ':')
//   javac -d /tmp/oracle -cp "$CP" PartitionControlOracle.java
//   java -cp "$CP:/tmp/oracle" org.apache.kafka.controller.PartitionControlOracle < cases.txt \
//     | grep '^= ' | cut -c3- > answers.txt
package org.apache.kafka.controller;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;

import org.apache.kafka.common.message.AlterPartitionRequestData;
import org.apache.kafka.common.message.ElectLeadersRequestData;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.metadata.ConfigRecord;
import org.apache.kafka.common.metadata.FeatureLevelRecord;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.RegisterBrokerRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.placement.StripedReplicaPlacer;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.timeline.SnapshotRegistry;

/** A case: "minIsr unclean | record-hex,record-hex,... | op args". Ops: "alter VERSION REQUEST-HEX",
 *  "elect VERSION REQUEST-HEX", "fence BROKER", "unfence BROKER", "shutdown BROKER" (controlled),
 *  "unregister BROKER", "restart BROKER CLEAN" (a new incarnation registering), "unclean",
 *  "balance". The answer, on a line of its
 *  own that starts with "= " (Kafka's own logging may write other lines): "REPLY-HEX | RECORD-HEX,..."
 *  ("-" for no reply body; a boolean reply is "true"/"false"), or "ERROR Class message". */
public class PartitionControlOracle {
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                System.out.println("= " + run(line));
            } catch (Exception e) {
                String message = e.getMessage() == null ? "" : e.getMessage().replace('\n', ' ');
                System.out.println("= ERROR " + e.getClass().getSimpleName() + " " + message);
            }
        }
    }

    static String run(String line) {
        String[] parts = line.split(" \\| ", -1);
        String[] statics = parts[0].trim().split(" ");
        Map<String, Object> staticConfig = new HashMap<>();
        staticConfig.put("min.insync.replicas", statics[0]);
        staticConfig.put("unclean.leader.election.enable", statics[1]);
        LogContext logContext = new LogContext();
        SnapshotRegistry registry = new SnapshotRegistry(logContext);
        FeatureControlManager features = new FeatureControlManager.Builder()
            .setSnapshotRegistry(registry)
            .setQuorumFeatures(new QuorumFeatures(0, QuorumFeatures.defaultSupportedFeatureMap(true), List.of(0)))
            .build();
        ClusterControlManager cluster = new ClusterControlManager.Builder()
            .setLogContext(logContext)
            .setTime(Time.SYSTEM)
            .setSnapshotRegistry(registry)
            .setSessionTimeoutNs(9_000_000_000L)
            .setReplicaPlacer(new StripedReplicaPlacer(new java.util.Random(0)))
            .setFeatureControlManager(features)
            .setBrokerShutdownHandler((id, clean, records) -> { })
            .build();
        ConfigurationControlManager configs = new ConfigurationControlManager.Builder()
            .setSnapshotRegistry(registry)
            .setFeatureControl(features)
            .setStaticConfig(staticConfig)
            .setNodeId(1)  // the controller's own broker-resource configs come before the cluster's
            .setKafkaConfigSchema(kafka.server.KafkaRaftServer$.MODULE$.configSchema())
            .build();
        ReplicationControlManager replication = new ReplicationControlManager.Builder()
            .setSnapshotRegistry(registry)
            .setLogContext(logContext)
            .setConfigurationControl(configs)
            .setClusterControl(cluster)
            .setFeatureControl(features)
            .build();
        cluster.activate();
        long offset = 0;
        for (String hex : parts[1].trim().split(",")) {
            if (hex.isEmpty()) continue;
            ApiMessage record = decodeRecord(hex).message();
            if (record instanceof FeatureLevelRecord r) features.replay(r);
            else if (record instanceof RegisterBrokerRecord r) cluster.replay(r, offset);
            else if (record instanceof TopicRecord r) replication.replay(r);
            else if (record instanceof PartitionRecord r) replication.replay(r);
            else if (record instanceof PartitionChangeRecord r) replication.replay(r);
            else if (record instanceof ConfigRecord r) configs.replay(r);
            else throw new IllegalArgumentException("unexpected setup record " + record);
            offset++;
        }
        String[] op = parts[2].trim().split(" ");
        List<ApiMessageAndVersion> records = new ArrayList<>();
        String reply;
        switch (op[0]) {
            case "alter": {
                short version = Short.parseShort(op[1]);
                AlterPartitionRequestData request = new AlterPartitionRequestData(accessor(op[2]), version);
                RequestHeaderData header = new RequestHeaderData().setRequestApiKey((short) 56).setRequestApiVersion(version);
                ControllerResult<?> result = replication.alterPartition(
                    new ControllerRequestContext(header, KafkaPrincipal.ANONYMOUS, OptionalLong.empty()), request);
                records.addAll(result.records());
                reply = encode((Message) result.response(), version);
                break;
            }
            case "elect": {
                short version = Short.parseShort(op[1]);
                ElectLeadersRequestData request = new ElectLeadersRequestData(accessor(op[2]), version);
                ControllerResult<?> result = replication.electLeaders(request);
                records.addAll(result.records());
                reply = encode((Message) result.response(), version);
                break;
            }
            case "fence":
                replication.handleBrokerFenced(Integer.parseInt(op[1]), records);
                reply = "-";
                break;
            case "unfence": {
                int id = Integer.parseInt(op[1]);
                replication.handleBrokerUnfenced(id, cluster.registration(id).epoch(), records);
                reply = "-";
                break;
            }
            case "shutdown": {
                int id = Integer.parseInt(op[1]);
                replication.handleBrokerInControlledShutdown(id, cluster.registration(id).epoch(), records);
                reply = "-";
                break;
            }
            case "unregister": {
                int id = Integer.parseInt(op[1]);
                replication.handleBrokerUnregistered(id, cluster.registration(id).epoch(), records);
                reply = "-";
                break;
            }
            case "restart": {
                replication.handleBrokerShutdown(Integer.parseInt(op[1]), Boolean.parseBoolean(op[2]), records);
                reply = "-";
                break;
            }
            case "unclean": {
                ControllerResult<Boolean> result = replication.maybeElectUncleanLeaders();
                records.addAll(result.records());
                reply = result.response().toString();
                break;
            }
            case "balance": {
                ControllerResult<Boolean> result = replication.maybeBalancePartitionLeaders();
                records.addAll(result.records());
                reply = result.response().toString();
                break;
            }
            default:
                throw new IllegalArgumentException("unknown op " + op[0]);
        }
        List<String> out = new ArrayList<>();
        for (ApiMessageAndVersion r : records) out.add(encodeRecord(r));
        return reply + " | " + String.join(",", out);
    }

    static ByteBufferAccessor accessor(String hex) {
        return new ByteBufferAccessor(ByteBuffer.wrap(HEX.parseHex(hex)));
    }

    static ApiMessageAndVersion decodeRecord(String hex) {
        byte[] bytes = HEX.parseHex(hex);
        return new MetadataRecordSerde().read(new ByteBufferAccessor(ByteBuffer.wrap(bytes)), bytes.length);
    }

    static String encodeRecord(ApiMessageAndVersion record) {
        MetadataRecordSerde serde = new MetadataRecordSerde();
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buffer = ByteBuffer.allocate(serde.recordSize(record, cache));
        serde.write(record, cache, new ByteBufferAccessor(buffer));
        return HEX.formatHex(buffer.array());
    }

    static String encode(Message message, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buffer = ByteBuffer.allocate(message.size(cache, version));
        message.write(new ByteBufferAccessor(buffer), cache, version);
        return HEX.formatHex(buffer.array());
    }
}
