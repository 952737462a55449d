package dev.purgatory.javaclients;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Config changes through the AdminClient's incrementalAlterConfigs: a topic's retention.ms
 * set and cleanup.policy appended to, read back with describeConfigs (value and source); a
 * bad value refused (the exception and Kafka's message); and the brokers' cluster-wide
 * default (the BROKER resource named "") set, described, and deleted again.
 */
final class AlterConfigsScenario {
    private AlterConfigsScenario() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        Map<String, Object> result = new LinkedHashMap<>();
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(config)) {
            admin.createTopics(Collections.singleton(new NewTopic(topic, 1, (short) 3)))
                    .all().get(30, TimeUnit.SECONDS);
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            List<AlterConfigOp> ops = Arrays.asList(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "60000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
            admin.incrementalAlterConfigs(Collections.singletonMap(resource, ops)).all().get(30, TimeUnit.SECONDS);
            Config described = admin.describeConfigs(Collections.singleton(resource)).all().get().get(resource);
            result.put("retention.ms", entry(described.get("retention.ms")));
            result.put("cleanup.policy", entry(described.get("cleanup.policy")));
            List<AlterConfigOp> bad = Collections.singletonList(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET));
            try {
                admin.incrementalAlterConfigs(Collections.singletonMap(resource, bad)).all().get(30, TimeUnit.SECONDS);
                result.put("refused", null);
            } catch (ExecutionException e) {
                Map<String, Object> refused = new LinkedHashMap<>();
                refused.put("error", e.getCause().getClass().getSimpleName());
                refused.put("message", e.getCause().getMessage());
                result.put("refused", refused);
            }
            ConfigResource brokers = new ConfigResource(ConfigResource.Type.BROKER, "");
            admin.incrementalAlterConfigs(Collections.singletonMap(brokers, Collections.singletonList(
                    new AlterConfigOp(new ConfigEntry("log.retention.bytes", "123456789"), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS);
            Config defaults = admin.describeConfigs(Collections.singleton(brokers)).all().get().get(brokers);
            result.put("default", entry(defaults.get("log.retention.bytes")));
            admin.incrementalAlterConfigs(Collections.singletonMap(brokers, Collections.singletonList(
                    new AlterConfigOp(new ConfigEntry("log.retention.bytes", null), AlterConfigOp.OpType.DELETE))))
                    .all().get(30, TimeUnit.SECONDS);
            Config after = admin.describeConfigs(Collections.singleton(brokers)).all().get().get(brokers);
            result.put("default_after_delete", after.get("log.retention.bytes") == null ? null : "still set");
        }
        return result;
    }

    private static Map<String, Object> entry(ConfigEntry entry) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (entry == null) return out;
        out.put("value", entry.value());
        out.put("source", entry.source().name());
        return out;
    }
}
