// What Apache Kafka's KafkaConfig says of whole server.properties, for test_listener_configs.py: run
// with the Kafka jars on the class path (java -cp 'lib/*' KafkaConfigOracle.java). Reads one
// configuration per line, as KEY=VALUE entries separated by tabs, and answers each with one line:
// "ok" when a KafkaConfig is built from it, else the message of what its construction throws.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

public class KafkaConfigOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            Properties props = new Properties();
            for (String entry : line.split("\t")) {
                int eq = entry.indexOf('=');
                props.put(entry.substring(0, eq), entry.substring(eq + 1));
            }
            try {
                new kafka.server.KafkaConfig(props);
                System.out.println("ok");
            } catch (RuntimeException e) {
                System.out.println(String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
    }
}
