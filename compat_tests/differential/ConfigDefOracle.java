// What Apache Kafka's own config declarations say, for test_config_bounds.py: run with the Kafka
// jars on the class path (java -cp 'lib/*' ConfigDefOracle.java). Reads lines "KIND<TAB>NAME" or
// "KIND<TAB>NAME<TAB>VALUE" (KIND: topic or broker) or "default<TAB>KIND<TAB>NAME", and answers
// each with one line:
//   for a name:    TYPE<TAB>VALIDATOR   (the validator as ConfigDef prints it; "-" for none; "?" unknown)
//   for a value:   "ok", or the message of the ConfigException that parsing and validating it throws
//   for a default: the default as ConfigDef prints it ("<null>" for null, "<required>" for none, "?" unknown)
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;

public class ConfigDefOracle {
    public static void main(String[] args) throws Exception {
        ConfigDef topic = org.apache.kafka.storage.internals.log.LogConfig.configDefCopy();
        ConfigDef broker = kafka.server.KafkaConfig.configDef();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", 3);
            if (parts[0].equals("default")) {
                ConfigDef.ConfigKey key = (parts[1].equals("topic") ? topic : broker).configKeys().get(parts[2]);
                System.out.println(defaultOf(key));
                continue;
            }
            ConfigDef def = parts[0].equals("topic") ? topic : broker;
            ConfigDef.ConfigKey key = def.configKeys().get(parts[1]);
            if (key == null) {
                System.out.println("?");
            } else if (parts.length == 2) {
                System.out.println(key.type + "\t" + (key.validator == null ? "-" : key.validator.toString()));
            } else {
                System.out.println(check(key, parts[2]));
            }
        }
    }

    static String defaultOf(ConfigDef.ConfigKey key) {
        if (key == null) {
            return "?";
        }
        if (!key.hasDefault()) {
            return "<required>";
        }
        return key.defaultValue == null ? "<null>" : ConfigDef.convertToString(key.defaultValue, key.type);
    }

    static String check(ConfigDef.ConfigKey key, String value) {
        try {
            Object parsed = ConfigDef.parseType(key.name, value, key.type);
            if (key.validator != null) {
                key.validator.ensureValid(key.name, parsed);
            }
            return "ok";
        } catch (ConfigException e) {
            return e.getMessage().replace('\n', ' ');
        }
    }
}
