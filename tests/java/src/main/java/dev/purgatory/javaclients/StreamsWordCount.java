package dev.purgatory.javaclients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application: counts the words (values) of {@code --input}, keyed by
 * whoever wrote them, so {@code groupBy} repartitions them by word through the internal
 * topic {@code <application-id>-counts-repartition} and {@code count} keeps them in the
 * store {@code counts} backed by {@code <application-id>-counts-changelog}; each new count
 * goes to {@code --output} (key the word, value a long).
 *
 * <p>It runs ({@code --processing-guarantee}, at_least_once unless told; no cache, commits
 * every 100 ms, purging repartition topics at every commit) until the counts it emitted add up to {@code --expected} records, then
 * until DeleteRecords moved the log start of a repartition partition, and closes (which
 * commits). Run again with the same {@code --application-id} it resumes from the committed
 * offsets and restores its store from the changelog, so {@code --expected} is the total
 * over every run; each run's records must name every word, so every count is seen again.
 * Its consumer is a static member ({@code group.instance.id}), so the next run takes the
 * last one's place in the group without waiting for its session to expire.
 */
final class StreamsWordCount {
    private StreamsWordCount() {}

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String applicationId = options.get("application-id");
        String input = options.get("input");
        String output = options.get("output");
        long expected = options.integer("expected");
        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(StreamsConfig.STATE_DIR_CONFIG, options.get("state-dir"));
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, options.get("processing-guarantee", StreamsConfig.AT_LEAST_ONCE));
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        config.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, "0");
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "3");
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), "300");
        // A static member: a Streams consumer does not leave its group on close, so a dynamic
        // one would hold its partitions until its session expired (45 s); the next run, under
        // the same group.instance.id, takes its place at once.
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), applicationId + "-instance");

        Map<String, Long> counts = new ConcurrentHashMap<>();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupBy((writer, word) -> word, Grouped.as("counts"))
                .count(Materialized.as("counts"))
                .toStream()
                .peek(counts::put)
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        AtomicReference<Throwable> failed = new AtomicReference<>();
        List<String> states = new ArrayList<>();
        Map<String, Object> result = new LinkedHashMap<>();
        Properties adminConfig = new Properties();
        adminConfig.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        streams.setStateListener((now, before) -> {
            synchronized (states) {
                states.add(now.name());
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            failed.set(e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        try (Admin admin = Admin.create(adminConfig)) {
            streams.start();
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (counts.values().stream().mapToLong(Long::longValue).sum() < expected) {
                if (failed.get() != null) throw new IllegalStateException("the stream thread died", failed.get());
                deadline.check("counts adding up to " + expected + ", have " + counts);
                Thread.sleep(20);
            }
            result.put("counts", new TreeMap<>(counts));
            String repartition = applicationId + "-counts-repartition";
            Map<String, Object> logStarts;
            while (true) {
                logStarts = logStarts(admin, repartition, options.integer("partitions"));
                if (logStarts.values().stream().anyMatch(start -> (Long) start > 0)) break;
                if (failed.get() != null) throw new IllegalStateException("the stream thread died", failed.get());
                deadline.check("DeleteRecords on " + repartition + ", log starts " + logStarts);
                Thread.sleep(20);
            }
            result.put("repartition_log_starts", logStarts);
        } finally {
            result.put("closed", streams.close(JavaClients.WAIT));
        }
        // The listener may not have heard of NOT_RUNNING yet when close returns.
        synchronized (states) {
            result.put("states", new ArrayList<>(states));
        }
        result.put("state", streams.state().name());
        return result;
    }

    /** {partition: log start offset} of {@code topic}'s partitions, from ListOffsets(earliest). */
    private static Map<String, Object> logStarts(Admin admin, String topic, int partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> asked = new LinkedHashMap<>();
        for (int p = 0; p < partitions; p++) asked.put(new TopicPartition(topic, p), OffsetSpec.earliest());
        Map<TopicPartition, Long> starts = new LinkedHashMap<>();
        for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e :
                admin.listOffsets(asked).all().get().entrySet()) {
            starts.put(e.getKey(), e.getValue().offset());
        }
        return JavaClients.byPartition(starts);
    }
}
