package kafkalike.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java producer of scripts/chaos.py: writes {@code NAME:SEQUENCE} values, the sequence growing
 * by one per record, to partition {@code SEQUENCE % PARTITIONS} of a topic at about RATE records a
 * second, until its stdin closes; then it flushes, closes the producer and prints {@code done}.
 *
 * <p>Usage: {@code java -cp KAFKA_CLIENTS ChaosProducer.java BOOTSTRAP TOPIC NAME PARTITIONS RATE all|1}
 * ({@code all}: acks=all and idempotence; {@code 1}: acks=1 without idempotence). One line per
 * event on stdout: {@code sent SEQ PARTITION}, {@code ack SEQ PARTITION OFFSET},
 * {@code fail SEQ PARTITION ERROR}. Client logs go to stderr.
 */
public final class ChaosProducer {
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(150);

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: ChaosProducer BOOTSTRAP TOPIC NAME PARTITIONS RATE all|1");
            System.exit(2);
        }
        String topic = args[1];
        String name = args[2];
        int partitions = Integer.parseInt(args[3]);
        double rate = Double.parseDouble(args[4]);
        boolean safe = args[5].equals("all");
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ACKS_CONFIG, safe ? "all" : "1");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(safe));
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                while (in.readLine() != null) {
                    // any line or EOF: only EOF stops
                }
            } catch (Exception e) {
                // a broken stdin stops the producer as EOF does
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        long intervalNanos = (long) (1_000_000_000L / rate);
        long next = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (long seq = 0; !stop.get(); seq++) {
                long now = System.nanoTime();
                if (next > now) {
                    Thread.sleep((next - now) / 1_000_000, (int) ((next - now) % 1_000_000));
                }
                next += intervalNanos;
                final long sequence = seq;
                final int partition = (int) (seq % partitions);
                byte[] value = (name + ":" + seq).getBytes(StandardCharsets.UTF_8);
                synchronized (out) {
                    out.println("sent " + sequence + " " + partition);
                    out.flush(); // read as it is sent: the run stamps the attempt with the cluster's state
                }
                try {
                    producer.send(new ProducerRecord<>(topic, partition, null, value), (metadata, error) -> {
                        synchronized (out) {
                            if (error == null) {
                                out.println("ack " + sequence + " " + partition + " " + metadata.offset());
                            } else {
                                out.println("fail " + sequence + " " + partition + " " + error.getClass().getSimpleName());
                            }
                            out.flush();
                        }
                    });
                } catch (Exception e) {
                    synchronized (out) {
                        out.println("fail " + sequence + " " + partition + " " + e.getClass().getSimpleName());
                    }
                }
            }
            producer.flush();
            producer.close(CLOSE_TIMEOUT);
        }
        synchronized (out) {
            out.println("done");
            out.flush();
        }
    }
}
