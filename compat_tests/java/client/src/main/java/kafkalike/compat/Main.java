package kafkalike.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Runs named compatibility scenarios with the Java client against one broker and prints one JSON
 * line per scenario on stdout: {"client", "client_version", "scenario", "status", "error", "ms"}.
 *
 * <p>Usage: {@code java -jar compat-client-V.jar HOST:PORT [SCENARIO ...]} (all scenarios when none
 * is named; {@code --list} prints the names). Every scenario creates topics of its own, bounds each
 * wait, and is stopped after {@link #SCENARIO_TIMEOUT_S} seconds. The broker is expected to run
 * with {@code auto.create.topics.enable=false}. Exit status: 0 when every scenario ran (whatever
 * its result), 2 on bad usage.
 */
public final class Main {
    static final long SCENARIO_TIMEOUT_S = 90;
    static final Duration WAIT = Duration.ofSeconds(30);
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    interface Scenario {
        void run(Ctx ctx) throws Exception;
    }

    /** A scenario's own verdict that a check failed (as opposed to an unexpected exception). */
    static final class CheckFailed extends RuntimeException {
        CheckFailed(String message) {
            super(message);
        }
    }

    static final Map<String, Scenario> SCENARIOS = new LinkedHashMap<>();

    static {
        SCENARIOS.put("admin-create-topics", Main::adminCreateTopics);
        SCENARIOS.put("admin-create-topic-errors", Main::adminCreateTopicErrors);
        SCENARIOS.put("admin-list-topics", Main::adminListTopics);
        SCENARIOS.put("admin-describe-topics", Main::adminDescribeTopics);
        SCENARIOS.put("admin-describe-cluster", Main::adminDescribeCluster);
        SCENARIOS.put("admin-create-partitions", Main::adminCreatePartitions);
        SCENARIOS.put("admin-describe-configs", Main::adminDescribeConfigs);
        SCENARIOS.put("admin-delete-topics", Main::adminDeleteTopics);
        SCENARIOS.put("admin-list-offsets", Main::adminListOffsets);
        SCENARIOS.put("produce-keyed-ordering", Main::produceKeyedOrdering);
        SCENARIOS.put("produce-acks-0", ctx -> produceWithAcks(ctx, "0"));
        SCENARIOS.put("produce-acks-1", ctx -> produceWithAcks(ctx, "1"));
        for (String codec : CODECS) {
            SCENARIOS.put("compression-" + codec, ctx -> compression(ctx, codec));
        }
        SCENARIOS.put("consume-from-beginning", Main::consumeFromBeginning);
        SCENARIOS.put("consume-from-offset", Main::consumeFromOffset);
        SCENARIOS.put("consume-from-timestamp", Main::consumeFromTimestamp);
        SCENARIOS.put("large-message", Main::largeMessage);
        SCENARIOS.put("error-unknown-topic", Main::errorUnknownTopic);
        SCENARIOS.put("error-record-too-large", Main::errorRecordTooLarge);
        SCENARIOS.put("error-offset-out-of-range", Main::errorOffsetOutOfRange);
        SCENARIOS.put("group-classic", ctx -> group(ctx, "classic"));
        SCENARIOS.put("group-consumer", ctx -> group(ctx, "consumer"));
        SCENARIOS.put("transactions", Main::transactions);
    }

    /**
     * Scenarios a test drives through stdin while it kills and restarts brokers: run only when
     * named (never by default, nor listed), with their settings in the environment.
     */
    static final Map<String, Scenario> DRIVEN = new LinkedHashMap<>();

    static {
        DRIVEN.put("failover-produce", Main::failoverProduce);
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--list")) {
            SCENARIOS.keySet().forEach(System.out::println);
            return;
        }
        if (args.length < 1 || args[0].startsWith("-")) {
            System.err.println("usage: compat-client HOST:PORT [SCENARIO ...] | --list");
            System.exit(2);
        }
        String bootstrap = args[0];
        List<String> names = args.length > 1 ? Arrays.asList(args).subList(1, args.length) : new ArrayList<>(SCENARIOS.keySet());
        for (String name : names) {
            if (!SCENARIOS.containsKey(name) && !DRIVEN.containsKey(name)) {
                System.err.println("unknown scenario " + name);
                System.exit(2);
            }
        }
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        for (String name : names) {
            long start = System.nanoTime();
            String status = "pass";
            String error = null;
            Future<?> future = pool.submit(() -> {
                SCENARIOS.getOrDefault(name, DRIVEN.get(name)).run(new Ctx(bootstrap, name));
                return null;
            });
            try {
                future.get(SCENARIO_TIMEOUT_S, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                future.cancel(true);
                status = "fail";
                error = "scenario timed out after " + SCENARIO_TIMEOUT_S + " s";
            } catch (ExecutionException e) {
                status = "fail";
                error = describe(e.getCause());
            }
            long ms = (System.nanoTime() - start) / 1_000_000;
            System.out.println(json(name, status, error, ms));
            System.out.flush();
        }
        System.exit(0);
    }

    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        Throwable cur = t;
        for (int depth = 0; cur != null && depth < 4; depth++, cur = cur.getCause()) {
            if (depth > 0) {
                sb.append(" <- ");
            }
            sb.append(cur instanceof CheckFailed ? "check failed" : cur.getClass().getSimpleName());
            if (cur.getMessage() != null) {
                sb.append(": ").append(cur.getMessage());
            }
            if (cur.getCause() == cur) {
                break;
            }
        }
        return sb.toString();
    }

    // The version kafka-clients records in its jar (AppInfoParser, which reads it, moved to an
    // internals package in 4.4).
    static final String CLIENT_VERSION = clientVersion();

    static String clientVersion() {
        try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties props = new Properties();
            props.load(in);
            return props.getProperty("version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    static String json(String scenario, String status, String error, long ms) {
        return "{\"client\": \"java\", \"client_version\": " + quote(CLIENT_VERSION)
                + ", \"scenario\": " + quote(scenario) + ", \"status\": " + quote(status)
                + ", \"error\": " + (error == null ? "null" : quote(error)) + ", \"ms\": " + ms + "}";
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"').toString();
    }

    // ---------------------------------------------------------------- helpers

    /** What one scenario run needs: the bootstrap address and unique topic names. */
    static final class Ctx {
        final String bootstrap;
        final String scenario;
        final String suffix = UUID.randomUUID().toString().substring(0, 8);

        Ctx(String bootstrap, String scenario) {
            this.bootstrap = bootstrap;
            this.scenario = scenario;
        }

        String topic(String tag) {
            return "java-" + scenario + "-" + tag + "-" + suffix;
        }

        Admin admin() {
            Properties p = new Properties();
            p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
            p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
            return Admin.create(p);
        }

        KafkaProducer<byte[], byte[]> producer(String... overrides) {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
            p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
            put(p, overrides);
            return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        }

        KafkaConsumer<byte[], byte[]> consumer(String... overrides) {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
            put(p, overrides);
            return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }

        void createTopic(String name, int partitions, String... configs) throws Exception {
            try (Admin admin = admin()) {
                NewTopic topic = new NewTopic(name, partitions, (short) 1);
                Map<String, String> map = new HashMap<>();
                for (int i = 0; i + 1 < configs.length; i += 2) {
                    map.put(configs[i], configs[i + 1]);
                }
                topic.configs(map);
                admin.createTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
                // Until every partition's leader answers (the admin client retries NOT_LEADER):
                // Apache Kafka's leaders take writes a moment after CreateTopics returns.
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                for (int i = 0; i < partitions; i++) {
                    latest.put(new TopicPartition(name, i), OffsetSpec.latest());
                }
                admin.listOffsets(latest).all().get(30, TimeUnit.SECONDS);
            }
        }

        /** Assign every partition from the beginning and read until {@code count} records came back. */
        List<ConsumerRecord<byte[], byte[]>> consumeAll(String topic, int partitions, int count, String... overrides) {
            try (KafkaConsumer<byte[], byte[]> consumer = consumer(overrides)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int i = 0; i < partitions; i++) {
                    tps.add(new TopicPartition(topic, i));
                }
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                return pollUntil(consumer, count);
            }
        }
    }

    static void put(Properties p, String... kv) {
        for (int i = 0; i + 1 < kv.length; i += 2) {
            p.put(kv[i], kv[i + 1]);
        }
    }

    static List<ConsumerRecord<byte[], byte[]>> pollUntil(KafkaConsumer<byte[], byte[]> consumer, int count) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (got.size() < count && System.nanoTime() < deadline) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
            records.forEach(got::add);
        }
        check(got.size() == count, "expected " + count + " records, got " + got.size() + " within " + WAIT.getSeconds() + " s");
        return got;
    }

    /**
     * Describe topics, retrying while a broker still answers UnknownTopicOrPartition: Apache Kafka
     * makes a new topic visible in its metadata a moment after CreateTopics returns.
     */
    static Map<String, TopicDescription> describe(Admin admin, Collection<String> names) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            try {
                return admin.describeTopics(names).allTopicNames().get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    /** Describe one topic until it has {@code partitions} partitions (new ones show up a moment later on Kafka). */
    static TopicDescription describeWithPartitions(Admin admin, String name, int partitions) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            TopicDescription d = describe(admin, List.of(name)).get(name);
            if (d.partitions().size() == partitions || System.nanoTime() > deadline) {
                return d;
            }
            Thread.sleep(100);
        }
    }

    static void check(boolean ok, String message) {
        if (!ok) {
            throw new CheckFailed(message);
        }
    }

    static <T extends Throwable> T expect(Class<T> type, ThrowingRunnable action) {
        try {
            action.run();
        } catch (Throwable t) {
            for (Throwable cur = t; cur != null; cur = cur.getCause()) {
                if (type.isInstance(cur)) {
                    return type.cast(cur);
                }
                if (cur.getCause() == cur) {
                    break;
                }
            }
            throw new CheckFailed("expected " + type.getSimpleName() + ", got " + describe(t));
        }
        throw new CheckFailed("expected " + type.getSimpleName() + ", got no exception");
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    /** A message set like the Python tests': keyed (every fourth unkeyed), with headers and explicit timestamps. */
    static final class Msg {
        final int index;
        final byte[] key;
        final byte[] value;
        final long timestamp;

        Msg(int index, long base, int keys) {
            this.index = index;
            this.key = index % 4 == 3 ? null : ("user-" + (index % keys)).getBytes(StandardCharsets.UTF_8);
            this.value = String.format("%06d|kafkalike compatibility payload kafkalike compatibility payload", index)
                    .getBytes(StandardCharsets.UTF_8);
            this.timestamp = base + 10L * index;
        }

        ProducerRecord<byte[], byte[]> record(String topic) {
            List<Header> headers = List.of(
                    new RecordHeader("index", Integer.toString(index).getBytes(StandardCharsets.UTF_8)),
                    new RecordHeader("trace", "first".getBytes(StandardCharsets.UTF_8)),
                    new RecordHeader("trace", ("second-" + index).getBytes(StandardCharsets.UTF_8)));
            return new ProducerRecord<>(topic, null, timestamp, key, value, headers);
        }
    }

    static List<Msg> messages(int count, int keys) {
        long base = System.currentTimeMillis() - 3_600_000L;
        List<Msg> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(new Msg(i, base, keys));
        }
        return out;
    }

    static int indexOf(byte[] value) {
        String s = new String(value, 0, 6, StandardCharsets.US_ASCII);
        return Integer.parseInt(s);
    }

    static List<RecordMetadata> produce(KafkaProducer<byte[], byte[]> producer, String topic, List<Msg> msgs) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (Msg m : msgs) {
            futures.add(producer.send(m.record(topic)));
        }
        producer.flush();
        List<RecordMetadata> acks = new ArrayList<>();
        for (Future<RecordMetadata> f : futures) {
            acks.add(f.get(30, TimeUnit.SECONDS));
        }
        return acks;
    }

    /** Everything came back once and intact, each key on one partition, each partition in send order. */
    static void checkRoundTrip(List<Msg> sent, List<ConsumerRecord<byte[], byte[]>> got, int partitions) {
        Map<Integer, ConsumerRecord<byte[], byte[]>> byIndex = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : got) {
            int i = indexOf(r.value());
            check(byIndex.put(i, r) == null, "message " + i + " consumed twice");
        }
        check(byIndex.size() == sent.size(), "expected " + sent.size() + " distinct messages, got " + byIndex.size());
        Map<String, Set<Integer>> partitionsOfKey = new HashMap<>();
        for (Msg m : sent) {
            ConsumerRecord<byte[], byte[]> r = byIndex.get(m.index);
            check(r != null, "message " + m.index + " missing");
            check(Arrays.equals(r.key(), m.key), "key of message " + m.index);
            check(Arrays.equals(r.value(), m.value), "value of message " + m.index);
            check(r.timestamp() == m.timestamp, "timestamp of message " + m.index + ": " + r.timestamp() + " != " + m.timestamp);
            check(r.timestampType().name.equals("CreateTime"), "timestamp type of message " + m.index + ": " + r.timestampType());
            Header[] headers = r.headers().toArray();
            check(headers.length == 3 && headers[0].key().equals("index") && headers[2].key().equals("trace")
                    && new String(headers[2].value(), StandardCharsets.UTF_8).equals("second-" + m.index),
                    "headers of message " + m.index);
            check(r.partition() >= 0 && r.partition() < partitions, "partition " + r.partition());
            if (m.key != null) {
                partitionsOfKey.computeIfAbsent(new String(m.key, StandardCharsets.UTF_8), k -> new java.util.HashSet<>()).add(r.partition());
            }
        }
        partitionsOfKey.forEach((k, ps) -> check(ps.size() == 1, "key " + k + " on partitions " + ps));
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> perPartition = new HashMap<>();
        got.forEach(r -> perPartition.computeIfAbsent(r.partition(), p -> new ArrayList<>()).add(r));
        perPartition.forEach((p, records) -> {
            records.sort((a, b) -> Long.compare(a.offset(), b.offset()));
            for (int i = 0; i < records.size(); i++) {
                check(records.get(i).offset() == i, "partition " + p + " offsets not contiguous from 0");
                if (i > 0) {
                    check(indexOf(records.get(i - 1).value()) < indexOf(records.get(i).value()), "partition " + p + " not in send order");
                }
            }
        });
    }

    // ---------------------------------------------------------------- admin

    static void adminCreateTopics(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        String b = ctx.topic("b");
        try (Admin admin = ctx.admin()) {
            NewTopic withConfig = new NewTopic(b, 1, (short) 1).configs(Map.of("max.message.bytes", "65536", "retention.ms", "3600000"));
            admin.createTopics(List.of(new NewTopic(a, 3, (short) 1), withConfig)).all().get(30, TimeUnit.SECONDS);
            Map<String, TopicDescription> d = describe(admin, List.of(a, b));
            check(d.get(a).partitions().size() == 3, "partitions of " + a);
            check(d.get(b).partitions().size() == 1, "partitions of " + b);
            // Defaults: -1 partitions and replication take the broker's num.partitions / default.replication.factor.
            String c = ctx.topic("c");
            admin.createTopics(List.of(new NewTopic(c, java.util.Optional.empty(), java.util.Optional.empty()))).all().get(30, TimeUnit.SECONDS);
            check(describe(admin, List.of(c)).get(c).partitions().size() >= 1, "default partitions");
            check(admin.createTopics(List.of(new NewTopic(ctx.topic("d"), 2, (short) 1))).numPartitions(ctx.topic("d")).get(30, TimeUnit.SECONDS) == 2,
                    "numPartitions in the CreateTopics result");
        }
    }

    static void adminCreateTopicErrors(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        try (Admin admin = ctx.admin()) {
            admin.createTopics(List.of(new NewTopic(a, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            expect(TopicExistsException.class, () -> admin.createTopics(List.of(new NewTopic(a, 1, (short) 1))).all().get(30, TimeUnit.SECONDS));
            expect(InvalidReplicationFactorException.class,
                    () -> admin.createTopics(List.of(new NewTopic(ctx.topic("rf"), 1, (short) 3))).all().get(30, TimeUnit.SECONDS));
            expect(InvalidTopicException.class,
                    () -> admin.createTopics(List.of(new NewTopic("bad/name-" + ctx.suffix, 1, (short) 1))).all().get(30, TimeUnit.SECONDS));
            String v = ctx.topic("validate");
            admin.createTopics(List.of(new NewTopic(v, 2, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get(30, TimeUnit.SECONDS);
            check(!admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(v), "validateOnly created the topic");
        }
    }

    static void adminListTopics(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        String b = ctx.topic("b");
        try (Admin admin = ctx.admin()) {
            admin.createTopics(List.of(new NewTopic(a, 1, (short) 1), new NewTopic(b, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
            check(names.contains(a) && names.contains(b), "listTopics lacks the new topics: " + names);
            check(names.stream().noneMatch(n -> n.startsWith("__")), "listTopics shows internal topics: " + names);
        }
    }

    static void adminDescribeTopics(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        try (Admin admin = ctx.admin()) {
            admin.createTopics(List.of(new NewTopic(a, 3, (short) 1))).all().get(30, TimeUnit.SECONDS);
            TopicDescription d = describeWithPartitions(admin, a, 3);
            check(d.name().equals(a) && !d.isInternal(), "name/internal");
            check(d.topicId() != null && !d.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"), "topic id " + d.topicId());
            check(d.partitions().size() == 3, "partition count " + d.partitions().size());
            Collection<Node> nodes = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS);
            int nodeId = nodes.iterator().next().id();
            for (int i = 0; i < 3; i++) {
                TopicPartitionInfo p = d.partitions().get(i);
                check(p.partition() == i, "partition index " + p.partition());
                check(p.leader() != null && p.leader().id() == nodeId, "leader of " + i);
                check(p.replicas().size() == 1 && p.isr().size() == 1, "replicas/isr of " + i);
            }
        }
    }

    static void adminDescribeCluster(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            DescribeClusterResult r = admin.describeCluster();
            Collection<Node> nodes = r.nodes().get(30, TimeUnit.SECONDS);
            check(nodes.size() == 1, "nodes " + nodes);
            Node node = nodes.iterator().next();
            String host = ctx.bootstrap.substring(0, ctx.bootstrap.lastIndexOf(':'));
            int port = Integer.parseInt(ctx.bootstrap.substring(ctx.bootstrap.lastIndexOf(':') + 1));
            check(node.host().equals(host) && node.port() == port, "node address " + node);
            String clusterId = r.clusterId().get(30, TimeUnit.SECONDS);
            check(clusterId != null && !clusterId.isEmpty(), "cluster id " + clusterId);
            Node controller = r.controller().get(30, TimeUnit.SECONDS);
            check(controller != null && controller.id() == node.id(), "controller " + controller);
        }
    }

    static void adminCreatePartitions(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        try (Admin admin = ctx.admin()) {
            admin.createTopics(List.of(new NewTopic(a, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            admin.createPartitions(Map.of(a, NewPartitions.increaseTo(4))).all().get(30, TimeUnit.SECONDS);
            int count = describeWithPartitions(admin, a, 4).partitions().size();
            check(count == 4, "partition count after increase: " + count);
            expect(InvalidPartitionsException.class, () -> admin.createPartitions(Map.of(a, NewPartitions.increaseTo(2))).all().get(30, TimeUnit.SECONDS));
        }
        // The new partitions take records.
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            RecordMetadata md = producer.send(new ProducerRecord<>(a, 3, null, "late".getBytes(StandardCharsets.UTF_8))).get(30, TimeUnit.SECONDS);
            check(md.partition() == 3 && md.offset() == 0, "produce to the new partition: " + md);
        }
    }

    static void adminDescribeConfigs(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        try (Admin admin = ctx.admin()) {
            admin.createTopics(List.of(new NewTopic(a, 1, (short) 1).configs(Map.of("retention.ms", "123456")))).all().get(30, TimeUnit.SECONDS);
            ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, a);
            Config config = admin.describeConfigs(List.of(topic)).all().get(30, TimeUnit.SECONDS).get(topic);
            ConfigEntry retention = config.get("retention.ms");
            check(retention != null && retention.value().equals("123456"), "retention.ms " + retention);
            check(retention.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms source " + retention.source());
            ConfigEntry cleanup = config.get("cleanup.policy");
            check(cleanup != null && cleanup.value().equals("delete") && cleanup.isDefault(), "cleanup.policy " + cleanup);
            ConfigEntry maxBytes = config.get("max.message.bytes");
            check(maxBytes != null && maxBytes.value().equals("1048588"), "max.message.bytes " + maxBytes);
            String nodeId = Integer.toString(admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).iterator().next().id());
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, nodeId);
            Config brokerConfig = admin.describeConfigs(List.of(broker)).all().get(30, TimeUnit.SECONDS).get(broker);
            check(brokerConfig.get("num.partitions") != null, "broker config num.partitions missing");
        }
    }

    static void adminDeleteTopics(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        try (Admin admin = ctx.admin()) {
            admin.createTopics(List.of(new NewTopic(a, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            admin.deleteTopics(List.of(a)).all().get(30, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(a)) {
                check(System.nanoTime() < deadline, "topic still listed after delete");
                Thread.sleep(100);
            }
            expect(UnknownTopicOrPartitionException.class, () -> admin.deleteTopics(List.of(a)).all().get(30, TimeUnit.SECONDS));
        }
    }

    static void adminListOffsets(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 1);
        List<Msg> msgs = messages(10, 3);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            produce(producer, a, msgs);
        }
        TopicPartition tp = new TopicPartition(a, 0);
        try (Admin admin = ctx.admin()) {
            ListOffsetsResult.ListOffsetsResultInfo earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get(30, TimeUnit.SECONDS);
            ListOffsetsResult.ListOffsetsResultInfo latest = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get(30, TimeUnit.SECONDS);
            ListOffsetsResult.ListOffsetsResultInfo byTime = admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(msgs.get(4).timestamp - 5)))
                    .partitionResult(tp).get(30, TimeUnit.SECONDS);
            ListOffsetsResult.ListOffsetsResultInfo max = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get(30, TimeUnit.SECONDS);
            check(earliest.offset() == 0, "earliest " + earliest);
            check(latest.offset() == 10, "latest " + latest);
            check(byTime.offset() == 4 && byTime.timestamp() == msgs.get(4).timestamp, "by timestamp " + byTime);
            check(max.offset() == 9 && max.timestamp() == msgs.get(9).timestamp, "max timestamp " + max);
        }
    }

    // ---------------------------------------------------------------- produce / consume

    static void produceKeyedOrdering(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 3);
        List<Msg> msgs = messages(2000, 20);
        // The default producer: idempotent, acks=all, up to 5 requests in flight per connection.
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.BATCH_SIZE_CONFIG, "4096")) {
            List<RecordMetadata> acks = produce(producer, a, msgs);
            check(acks.size() == msgs.size(), "acks");
        }
        checkRoundTrip(msgs, ctx.consumeAll(a, 3, msgs.size()), 3);
    }

    static void produceWithAcks(Ctx ctx, String acks) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 2);
        List<Msg> msgs = messages(100, 5);
        if (acks.equals("0")) {
            // Nothing reports an acks=0 record lost: wait until the partitions' leader answers (a
            // ListOffsets through the admin client retries until it does) before sending any.
            try (Admin admin = ctx.admin()) {
                admin.listOffsets(Map.of(new TopicPartition(a, 0), OffsetSpec.latest(), new TopicPartition(a, 1), OffsetSpec.latest()))
                        .all().get(30, TimeUnit.SECONDS);
            }
        }
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.ACKS_CONFIG, acks, ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false",
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1")) {
            produce(producer, a, msgs);
        }
        checkRoundTrip(msgs, ctx.consumeAll(a, 2, msgs.size()), 2);
    }

    static void compression(Ctx ctx, String codec) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 3);
        List<Msg> msgs = messages(300, 5);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, "20")) {
            produce(producer, a, msgs);
        }
        checkRoundTrip(msgs, ctx.consumeAll(a, 3, msgs.size()), 3);
    }

    static void consumeFromBeginning(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 2);
        List<Msg> msgs = messages(50, 4);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            produce(producer, a, msgs);
        }
        // auto.offset.reset=earliest with no position: the same as seekToBeginning.
        try (KafkaConsumer<byte[], byte[]> consumer = ctx.consumer()) {
            consumer.assign(List.of(new TopicPartition(a, 0), new TopicPartition(a, 1)));
            checkRoundTrip(msgs, pollUntil(consumer, msgs.size()), 2);
            // Reading again from the beginning gives the same records.
            consumer.seekToBeginning(consumer.assignment());
            checkRoundTrip(msgs, pollUntil(consumer, msgs.size()), 2);
        }
    }

    static void consumeFromOffset(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 1);
        List<Msg> msgs = messages(30, 3);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4")) {
            produce(producer, a, msgs);
        }
        TopicPartition tp = new TopicPartition(a, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = ctx.consumer()) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 17);
            List<ConsumerRecord<byte[], byte[]>> got = pollUntil(consumer, 13);
            for (int i = 0; i < got.size(); i++) {
                check(got.get(i).offset() == 17 + i && indexOf(got.get(i).value()) == 17 + i, "record " + i + " after seek(17)");
            }
            check(consumer.position(tp) == 30, "position " + consumer.position(tp));
            // A seek into the middle of a compressed batch still starts at the requested offset.
            consumer.seek(tp, 3);
            got = pollUntil(consumer, 27);
            check(got.get(0).offset() == 3, "first offset after seek(3): " + got.get(0).offset());
            Map<TopicPartition, Long> end = consumer.endOffsets(List.of(tp));
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(List.of(tp));
            check(end.get(tp) == 30 && begin.get(tp) == 0, "begin/end offsets " + begin + " " + end);
        }
    }

    static void consumeFromTimestamp(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 1);
        List<Msg> msgs = messages(20, 3);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.COMPRESSION_TYPE_CONFIG, "gzip")) {
            produce(producer, a, msgs);
        }
        TopicPartition tp = new TopicPartition(a, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = ctx.consumer()) {
            consumer.assign(List.of(tp));
            OffsetAndTimestamp first = consumer.offsetsForTimes(Map.of(tp, msgs.get(0).timestamp - 1000)).get(tp);
            check(first != null && first.offset() == 0 && first.timestamp() == msgs.get(0).timestamp, "before the first: " + first);
            OffsetAndTimestamp mid = consumer.offsetsForTimes(Map.of(tp, msgs.get(11).timestamp - 5)).get(tp);
            check(mid != null && mid.offset() == 11 && mid.timestamp() == msgs.get(11).timestamp, "between 10 and 11: " + mid);
            OffsetAndTimestamp after = consumer.offsetsForTimes(Map.of(tp, msgs.get(19).timestamp + 1)).get(tp);
            check(after == null, "after the last: " + after);
            consumer.seek(tp, mid.offset());
            List<ConsumerRecord<byte[], byte[]>> got = pollUntil(consumer, 9);
            for (int i = 0; i < got.size(); i++) {
                check(got.get(i).timestamp() == msgs.get(11 + i).timestamp, "timestamp of record " + (11 + i));
            }
        }
    }

    static void largeMessage(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 1);
        byte[] big = new byte[900 * 1024];
        new Random(42).nextBytes(big);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            RecordMetadata md = producer.send(new ProducerRecord<>(a, 0, "big".getBytes(StandardCharsets.UTF_8), big)).get(30, TimeUnit.SECONDS);
            check(md.offset() == 0, "offset " + md.offset());
            producer.send(new ProducerRecord<>(a, 0, "small".getBytes(StandardCharsets.UTF_8), "after".getBytes(StandardCharsets.UTF_8))).get(30, TimeUnit.SECONDS);
        }
        List<ConsumerRecord<byte[], byte[]>> got = ctx.consumeAll(a, 1, 2);
        check(Arrays.equals(got.get(0).value(), big), "the large value came back changed");
        check(new String(got.get(1).value(), StandardCharsets.UTF_8).equals("after"), "the record after the large one");
    }

    // ---------------------------------------------------------------- errors

    static void errorUnknownTopic(Ctx ctx) throws Exception {
        String missing = ctx.topic("missing");
        try (Admin admin = ctx.admin()) {
            expect(UnknownTopicOrPartitionException.class, () -> admin.describeTopics(List.of(missing)).allTopicNames().get(30, TimeUnit.SECONDS));
        }
        // With auto-creation off the producer never sees the topic: send() fails once max.block.ms passes.
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.MAX_BLOCK_MS_CONFIG, "3000")) {
            org.apache.kafka.common.errors.TimeoutException e = expect(org.apache.kafka.common.errors.TimeoutException.class,
                    () -> producer.send(new ProducerRecord<>(missing, "x".getBytes(StandardCharsets.UTF_8))).get(30, TimeUnit.SECONDS));
            check(e.getMessage() != null && e.getMessage().contains("not present in metadata"), "producer timeout message: " + e.getMessage());
        }
        try (KafkaConsumer<byte[], byte[]> consumer = ctx.consumer()) {
            List<?> partitions = consumer.partitionsFor(missing, Duration.ofSeconds(10));
            check(partitions == null || partitions.isEmpty(), "partitionsFor an unknown topic: " + partitions);
        }
        try (Admin admin = ctx.admin()) {
            check(!admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(missing), "the unknown topic was created");
        }
    }

    static void errorRecordTooLarge(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 1);
        byte[] tooBig = new byte[1536 * 1024];
        new Random(7).nextBytes(tooBig);
        // The producer lets the record through (max.request.size 4 MB); the broker refuses it (message.max.bytes ~1 MB).
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "4194304")) {
            expect(RecordTooLargeException.class, () -> producer.send(new ProducerRecord<>(a, 0, null, tooBig)).get(30, TimeUnit.SECONDS));
        }
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            RecordMetadata md = producer.send(new ProducerRecord<>(a, 0, null, "fits".getBytes(StandardCharsets.UTF_8))).get(30, TimeUnit.SECONDS);
            check(md.offset() == 0, "the refused record was appended: next offset " + md.offset());
        }
        // A topic-level max.message.bytes applies too.
        String b = ctx.topic("b");
        ctx.createTopic(b, 1, "max.message.bytes", "2048");
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            expect(RecordTooLargeException.class, () -> producer.send(new ProducerRecord<>(b, 0, null, new byte[4096])).get(30, TimeUnit.SECONDS));
        }
    }

    static void errorOffsetOutOfRange(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 1);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            produce(producer, a, messages(5, 2));
        }
        TopicPartition tp = new TopicPartition(a, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = ctx.consumer(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none")) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 1000);
            OffsetOutOfRangeException e = expect(OffsetOutOfRangeException.class, () -> {
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (System.nanoTime() < deadline) {
                    consumer.poll(Duration.ofMillis(200));
                }
            });
            check(e.offsetOutOfRangePartitions().getOrDefault(tp, -1L) == 1000L, "out-of-range partitions " + e.offsetOutOfRangePartitions());
        }
        // With auto.offset.reset=latest the same seek recovers to the end.
        try (KafkaConsumer<byte[], byte[]> consumer = ctx.consumer(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest")) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 1000);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (consumer.position(tp) != 5 && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(200));
            }
            check(consumer.position(tp) == 5, "position after reset to latest: " + consumer.position(tp));
        }
    }

    // ---------------------------------------------------------------- groups and transactions

    static void group(Ctx ctx, String protocol) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 2);
        List<Msg> msgs = messages(40, 4);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer()) {
            produce(producer, a, msgs);
        }
        String group = "java-group-" + protocol + "-" + ctx.suffix;
        KafkaConsumer<byte[], byte[]> consumer = ctx.consumer(ConsumerConfig.GROUP_ID_CONFIG, group, "group.protocol", protocol);
        try {
            consumer.subscribe(List.of(a));
            checkRoundTrip(msgs, pollUntil(consumer, msgs.size()), 2);
            consumer.commitSync(Duration.ofSeconds(20));
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.of(new TopicPartition(a, 0), new TopicPartition(a, 1)), Duration.ofSeconds(20));
            long total = committed.values().stream().mapToLong(o -> o == null ? 0 : o.offset()).sum();
            check(total == msgs.size(), "committed offsets " + committed);
        } finally {
            consumer.close(Duration.ofSeconds(5));
        }
        // A second consumer of the group starts from the committed offsets: nothing left to read.
        KafkaConsumer<byte[], byte[]> again = ctx.consumer(ConsumerConfig.GROUP_ID_CONFIG, group, "group.protocol", protocol);
        try {
            again.subscribe(List.of(a));
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            int extra = 0;
            while (System.nanoTime() < deadline) {
                extra += again.poll(Duration.ofMillis(200)).count();
            }
            check(extra == 0, "a restarted member re-read " + extra + " records");
        } finally {
            again.close(Duration.ofSeconds(5));
        }
    }

    static void transactions(Ctx ctx) throws Exception {
        String a = ctx.topic("a");
        ctx.createTopic(a, 1);
        List<Msg> msgs = messages(10, 2);
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-txn-" + ctx.suffix,
                ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000")) {
            producer.initTransactions();
            producer.beginTransaction();
            produce(producer, a, msgs.subList(0, 5));
            producer.abortTransaction();
            producer.beginTransaction();
            produce(producer, a, msgs.subList(5, 10));
            producer.commitTransaction();
        }
        List<ConsumerRecord<byte[], byte[]>> got = ctx.consumeAll(a, 1, 5, ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                "read_committed".toLowerCase(Locale.ROOT));
        for (ConsumerRecord<byte[], byte[]> r : got) {
            check(indexOf(r.value()) >= 5, "read_committed returned an aborted record " + indexOf(r.value()));
        }
    }
    // -- driven scenarios ----------------------------------------------------------------------------

    static final BufferedReader DRIVER = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    /** Print a step's line for the driver, then wait for its go-ahead (a line on stdin). */
    static void handOver(String step) throws Exception {
        System.out.println("failover: " + step);
        System.out.flush();
        check(DRIVER.readLine() != null, "the driver closed stdin at " + step);
    }

    /**
     * Produce FAILOVER_COUNT values (java-NNNNNN, record i to partition i % FAILOVER_PARTITIONS) to
     * FAILOVER_TOPIC with the default producer (idempotent, acks=all, retrying) while the driver
     * kills a partition leader and starts it again: a third acknowledged; half of the next third
     * sent and "in flight" handed over (the driver kills the leader); the rest of it acknowledged
     * and "acked with a broker down" handed over (the driver restarts it); the last third
     * acknowledged. Then every value is read back: each once, each partition in send order.
     */
    static void failoverProduce(Ctx ctx) throws Exception {
        String topic = System.getenv("FAILOVER_TOPIC");
        int count = Integer.parseInt(System.getenv("FAILOVER_COUNT"));
        int partitions = Integer.parseInt(System.getenv("FAILOVER_PARTITIONS"));
        int third = count / 3;
        List<Future<RecordMetadata>> pending = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000")) {
            for (int i = 0; i < count; i++) {
                byte[] value = String.format(Locale.ROOT, "java-%06d", i).getBytes(StandardCharsets.UTF_8);
                pending.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, value)));
                if (i == third - 1 || i == 2 * third - 1 || i == count - 1) {
                    producer.flush();
                    for (Future<RecordMetadata> f : pending) {
                        f.get(60, TimeUnit.SECONDS);  // throws what the delivery failed with
                    }
                    pending.clear();
                    if (i == 2 * third - 1) {
                        handOver("acked with a broker down");
                    }
                } else if (i == third + third / 2 - 1) {
                    handOver("in flight");
                }
            }
        }
        Map<Integer, List<Integer>> byPartition = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = ctx.consumer()) {
            List<TopicPartition> all = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                all.add(new TopicPartition(topic, p));
            }
            consumer.assign(all);
            consumer.seekToBeginning(all);
            for (ConsumerRecord<byte[], byte[]> r : pollUntil(consumer, count)) {
                String value = new String(r.value(), StandardCharsets.UTF_8);
                byPartition.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(Integer.parseInt(value.substring(5)));
            }
        }
        Set<Integer> seen = new java.util.HashSet<>();
        for (Map.Entry<Integer, List<Integer>> e : byPartition.entrySet()) {
            List<Integer> indexes = e.getValue();
            for (int k = 0; k < indexes.size(); k++) {
                check(seen.add(indexes.get(k)), "value " + indexes.get(k) + " read twice");
                check(k == 0 || indexes.get(k - 1) < indexes.get(k), "partition " + e.getKey() + " out of send order: " + indexes);
            }
        }
        check(seen.size() == count, "read " + seen.size() + " distinct values of " + count + " acknowledged");
    }
}
