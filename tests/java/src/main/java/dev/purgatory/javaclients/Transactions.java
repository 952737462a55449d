package dev.purgatory.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Transactions (KIP-98) with Kafka's Java producer, three scenarios on partition 0 of their
 * topics:
 *
 * <ul>
 *   <li>{@code txn-commit-abort}: a transactional producer commits 10 records ({@code
 *       committed-i}) and aborts 5 it has sent ({@code aborted-i}); what a read_committed and a
 *       read_uncommitted consumer read, and the end offset each is shown.
 *   <li>{@code txn-send-offsets}: consume-transform-produce. 6 records go to {@code --input}; a
 *       group member (read_committed) reads 3, a transaction writes them transformed to {@code
 *       --output} with the member's position (sendOffsetsToTransaction with its group
 *       metadata) and aborts; the member goes back to the group's committed position, reads the
 *       same 3 again, and a second transaction commits. The group's committed offset in each
 *       transaction (as the AdminClient sees it, not waiting for stable offsets) and after it
 *       (as the member sees it, stable), and {@code --output} as each isolation level reads it.
 *       Last, a transaction sends offsets with the member's metadata of the generation before
 *       its own: what it throws, and the group's offset once it has aborted.
 *   <li>{@code txn-fence}: a zombie sends in a transaction; a producer of the same
 *       transactional.id initialises (aborting the zombie's transaction) and commits its own;
 *       the zombie's commit fails. What it threw, and what each isolation level reads.
 * </ul>
 */
final class Transactions {
    private Transactions() {}

    static Map<String, Object> commitAndAbort(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        try (KafkaProducer<String, String> producer = producer(options, options.get("transactional-id"))) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(topic, 0, "key-" + i, "committed-" + i));
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, 0, "key-" + i, "aborted-" + i));
            producer.flush(); // in the log: the abort must hide them
            producer.abortTransaction();
        }
        return readBoth(options, topic);
    }

    static Map<String, Object> sendOffsets(JavaClients.Options options) throws Exception {
        String input = options.get("input");
        String output = options.get("output");
        String group = options.get("group");
        TopicPartition source = new TopicPartition(input, 0);
        try (KafkaProducer<String, String> plain =
                new KafkaProducer<>(JavaClients.producerConfig(options, "java-txn-input"))) {
            for (int i = 0; i < 6; i++) plain.send(new ProducerRecord<>(input, 0, "key-" + i, "in-" + i));
            plain.flush();
        }
        Map<String, Object> result = new LinkedHashMap<>();
        Properties consumerConfig = JavaClients.consumerConfig(options, group, "java-txn-member");
        consumerConfig.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerConfig.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "3");
        try (KafkaProducer<String, String> producer = producer(options, options.get("transactional-id"));
                KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig);
                Admin admin = admin(options)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(input));
            for (String outcome : new String[] {"abort", "commit"}) {
                List<ConsumerRecord<String, String>> read = new ArrayList<>();
                JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
                while (read.size() < 3) {
                    deadline.check("3 records of " + input + " (have " + read.size() + ")");
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                        read.add(record);
                    }
                }
                producer.beginTransaction();
                List<String> values = new ArrayList<>();
                for (ConsumerRecord<String, String> record : read) {
                    values.add(record.value());
                    producer.send(new ProducerRecord<>(output, 0, record.key(), "out-" + record.value()));
                }
                long next = read.get(read.size() - 1).offset() + 1;
                producer.sendOffsetsToTransaction(
                        Collections.singletonMap(source, new OffsetAndMetadata(next)), consumer.groupMetadata());
                Map<String, Object> step = new LinkedHashMap<>();
                step.put("read", values);
                step.put("next", next);
                step.put("during", committed(admin, group, source));
                if (outcome.equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                // EndTxn is answered once the outcome is in the transaction log, before the
                // markers: a read_committed member asks for stable offsets (KIP-447), which
                // the coordinator answers once its marker is written.
                OffsetAndMetadata resume = consumer.committed(Collections.singleton(source)).get(source);
                step.put("after", resume == null ? null : resume.offset());
                result.put(outcome, step);
                // As an application does after an abort: back to the group's committed position.
                if (resume == null) {
                    consumer.seekToBeginning(Collections.singleton(source));
                } else {
                    consumer.seek(source, resume.offset());
                }
            }
            // KIP-447: offsets sent with the metadata of a generation before the member's are
            // refused (ILLEGAL_GENERATION), an error the transaction must abort on.
            ConsumerGroupMetadata current = consumer.groupMetadata();
            ConsumerGroupMetadata stale = new ConsumerGroupMetadata(
                    group, current.generationId() - 1, current.memberId(), current.groupInstanceId());
            producer.beginTransaction();
            try {
                producer.sendOffsetsToTransaction(Collections.singletonMap(source, new OffsetAndMetadata(6)), stale);
                result.put("stale_generation", "accepted");
            } catch (KafkaException e) {
                result.put("stale_generation", e.getClass().getSimpleName());
            }
            producer.abortTransaction();
            OffsetAndMetadata after = consumer.committed(Collections.singleton(source)).get(source);
            result.put("after_stale_generation", after == null ? null : after.offset());
        }
        result.putAll(readBoth(options, output));
        return result;
    }

    static Map<String, Object> fence(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        String id = options.get("transactional-id");
        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaProducer<String, String> zombie = producer(options, id)) {
            zombie.initTransactions();
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, 0, "zombie", "zombie"));
            zombie.flush();
            try (KafkaProducer<String, String> successor = producer(options, id)) {
                successor.initTransactions();
                successor.beginTransaction();
                successor.send(new ProducerRecord<>(topic, 0, "successor", "successor"));
                successor.commitTransaction();
            }
            try {
                zombie.commitTransaction();
                result.put("zombie_commit", "committed");
            } catch (KafkaException e) {
                result.put("zombie_commit", e.getClass().getSimpleName());
            }
        }
        result.putAll(readBoth(options, topic));
        return result;
    }

    private static KafkaProducer<String, String> producer(JavaClients.Options options, String transactionalId) {
        Properties config = JavaClients.producerConfig(options, "java-txn-" + transactionalId);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        return new KafkaProducer<>(config);
    }

    private static Admin admin(JavaClients.Options options) {
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        return Admin.create(config);
    }

    /** The group's committed offset of {@code tp}, pending transactional ones not waited for. */
    private static Long committed(Admin admin, String group, TopicPartition tp) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(
                        group, new ListConsumerGroupOffsetsOptions().requireStable(false))
                .partitionsToOffsetAndMetadata()
                .get();
        OffsetAndMetadata offset = offsets.get(tp);
        return offset == null ? null : offset.offset();
    }

    /**
     * {"read_committed": {"values", "end_offset"}, "read_uncommitted": ...} of partition 0, once
     * every transaction on it has ended: EndTxn is answered before the coordinator has the
     * markers written, so until then the last stable offset may be short of the high watermark.
     */
    private static Map<String, Object> readBoth(JavaClients.Options options, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = admin(options)) {
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (end(admin, tp, IsolationLevel.READ_COMMITTED) != end(admin, tp, IsolationLevel.READ_UNCOMMITTED)) {
                deadline.check("the last stable offset of " + tp + " reaching its high watermark");
                Thread.sleep(20);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (String isolation : new String[] {"read_committed", "read_uncommitted"}) {
            out.put(isolation, read(options, topic, isolation));
        }
        return out;
    }

    /** ListOffsets(latest) of {@code tp} at {@code isolation}: its last stable offset or high watermark. */
    private static long end(Admin admin, TopicPartition tp, IsolationLevel isolation) throws Exception {
        return admin.listOffsets(Collections.singletonMap(tp, OffsetSpec.latest()), new ListOffsetsOptions(isolation))
                .partitionResult(tp)
                .get()
                .offset();
    }

    /**
     * Every value of {@code topic}'s partition 0 a consumer of {@code isolation} (no group)
     * is given, read until its position reaches the end offset it is shown (for
     * read_committed, the last stable offset).
     */
    private static Map<String, Object> read(JavaClients.Options options, String topic, String isolation) {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-txn-reader-" + isolation);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        List<String> values = new ArrayList<>();
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            consumer.assign(Collections.singleton(tp));
            consumer.seekToBeginning(Collections.singleton(tp));
            long end = consumer.endOffsets(Collections.singleton(tp)).get(tp);
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (consumer.position(tp) < end) {
                deadline.check(isolation + " reaching offset " + end + " of " + topic + " (read " + values + ")");
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                }
            }
            out.put("values", values);
            out.put("end_offset", end);
        }
        return out;
    }
}
