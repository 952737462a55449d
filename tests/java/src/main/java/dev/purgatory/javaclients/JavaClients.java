package dev.purgatory.javaclients;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Apache Kafka's Java client against a broker: one scenario per run, its result as one line
 * of JSON on stdout (the client's logs go to stderr).
 *
 * <pre>
 *   java -cp ... dev.purgatory.javaclients.JavaClients SCENARIO --bootstrap HOST:PORT [--name value]...
 * </pre>
 *
 * Scenarios: {@code produce} ({@link Produce}), {@code consume} ({@link Consume}), {@code
 * group} ({@link GroupRebalance}), {@code share-consume} ({@link ShareConsume}), {@code admin} ({@link AdminScenario}), {@code log-info}
 * ({@link LogInfoScenario}), {@code topic-configs} ({@link TopicConfigsScenario}), {@code
 * alter-configs} ({@link AlterConfigsScenario}), {@code streams-word-count} ({@link
 * StreamsWordCount}, a Kafka Streams application), {@code txn-commit-abort}, {@code
 * txn-send-offsets} and {@code txn-fence} ({@link Transactions}), {@code
 * secured-round-trip} and {@code authentication-failure} ({@link Security}). A scenario that
 * fails prints {@code {"error": class, "message": ...}} and exits 1.
 */
public final class JavaClients {
    private JavaClients() {}

    interface Scenario {
        Map<String, Object> run(Options options) throws Exception;
    }

    public static void main(String[] args) {
        if (args.length == 0) {
            System.err.println("usage: JavaClients produce|consume|group|admin|log-info|topic-configs|alter-configs|streams-word-count|txn-commit-abort|txn-send-offsets|txn-fence|secured-round-trip|authentication-failure --bootstrap HOST:PORT ...");
            System.exit(2);
        }
        Map<String, Scenario> scenarios = new HashMap<>();
        scenarios.put("produce", Produce::run);
        scenarios.put("consume", Consume::run);
        scenarios.put("share-consume", ShareConsume::run);
        scenarios.put("group", GroupRebalance::run);
        scenarios.put("admin", AdminScenario::run);
        scenarios.put("log-info", LogInfoScenario::run);
        scenarios.put("validate", ValidateAfterLeaderChange::run);
        scenarios.put("topic-configs", TopicConfigsScenario::run);
        scenarios.put("alter-configs", AlterConfigsScenario::run);
        scenarios.put("streams-word-count", StreamsWordCount::run);
        scenarios.put("txn-commit-abort", Transactions::commitAndAbort);
        scenarios.put("txn-send-offsets", Transactions::sendOffsets);
        scenarios.put("txn-fence", Transactions::fence);
        scenarios.put("secured-round-trip", Security::roundTrip);
        scenarios.put("authentication-failure", Security::authenticationFailure);
        Scenario scenario = scenarios.get(args[0]);
        if (scenario == null) {
            System.err.println("unknown scenario " + args[0] + "; one of " + scenarios.keySet());
            System.exit(2);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("client_version", AppInfoParser.getVersion());
        int status = 0;
        try {
            result.putAll(scenario.run(new Options(args)));
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            result.put("error", cause.getClass().getName());
            result.put("message", String.valueOf(cause.getMessage()));
            cause.printStackTrace();
            status = 1;
        }
        System.out.println(Json.write(result));
        System.out.flush();
        System.exit(status);
    }

    /** {@code --name value} pairs after the scenario's name. */
    static final class Options {
        private final Map<String, String> values = new HashMap<>();

        Options(String[] args) {
            for (int i = 1; i < args.length; i += 2) {
                if (!args[i].startsWith("--") || i + 1 >= args.length) {
                    throw new IllegalArgumentException("expected --name value, got " + args[i]);
                }
                values.put(args[i].substring(2), args[i + 1]);
            }
        }

        String get(String name) {
            String value = values.get(name);
            if (value == null) throw new IllegalArgumentException("--" + name + " is required");
            return value;
        }

        String get(String name, String otherwise) {
            return values.getOrDefault(name, otherwise);
        }

        int integer(String name) {
            return Integer.parseInt(get(name));
        }
    }

    /** A deadline for waiting on a condition; {@link #check} throws once it has passed. */
    static final class Deadline {
        private final long end;

        Deadline(Duration within) {
            end = System.nanoTime() + within.toNanos();
        }

        boolean passed() {
            return System.nanoTime() - end > 0;
        }

        void check(String waitingFor) {
            if (passed()) throw new IllegalStateException("timed out waiting for " + waitingFor);
        }
    }

    static final Duration WAIT = Duration.ofSeconds(30);

    static Properties producerConfig(Options options, String clientId) {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return config;
    }

    /** A member of {@code group} on the classic protocol, committing by hand from the earliest. */
    static Properties consumerConfig(Options options, String group, String clientId) {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put("group.protocol", "classic");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        // A rejoin noticed within a heartbeat: the default 3 s would slow every rebalance.
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        config.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return config;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static Map<String, Object> record(ConsumerRecord<String, String> record) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("topic", record.topic());
        out.put("partition", record.partition());
        out.put("offset", record.offset());
        out.put("key", record.key());
        out.put("value", record.value());
        out.put("timestamp", record.timestamp());
        List<List<String>> headers = new ArrayList<>();
        for (Header header : record.headers()) {
            String value = header.value() == null ? null : new String(header.value(), StandardCharsets.UTF_8);
            headers.add(java.util.Arrays.asList(header.key(), value));
        }
        out.put("headers", headers);
        return out;
    }

    /** Partition numbers, sorted, of one topic's partitions. */
    static List<Integer> partitions(Collection<TopicPartition> partitions) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : partitions) out.add(tp.partition());
        out.sort(null);
        return out;
    }

    /** {partition: offset} with partitions as JSON keys. */
    static Map<String, Object> byPartition(Map<TopicPartition, ? extends Object> offsets) {
        Map<Integer, Object> sorted = new TreeMap<>();
        for (Map.Entry<TopicPartition, ? extends Object> e : offsets.entrySet()) {
            sorted.put(e.getKey().partition(), e.getValue());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<Integer, Object> e : sorted.entrySet()) out.put(e.getKey().toString(), e.getValue());
        return out;
    }

    /** What a failed call threw: the exception's simple name (Kafka's error) and message. */
    static Map<String, Object> failure(String operation, Throwable e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("operation", operation);
        out.put("exception", cause.getClass().getSimpleName());
        out.put("message", String.valueOf(cause.getMessage()));
        return out;
    }
}
