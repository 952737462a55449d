package dev.purgatory.javaclients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Two consumers of one group split a topic's {@code --partitions} partitions, and one takes
 * them all when the other leaves:
 *
 * <ol>
 *   <li>{@code first} subscribes and is given every partition ({@code alone});
 *   <li>{@code second} subscribes; both poll until the partitions are split between them
 *       ({@code split});
 *   <li>{@code --count} records are produced, round robin over the partitions; both read them
 *       all, each from its own partitions, and commit;
 *   <li>{@code second} closes (LeaveGroup); {@code first} polls until it has every partition
 *       again ({@code after_leave});
 *   <li>{@code --count} more records; {@code first} reads them, from where {@code second}
 *       committed on its partitions, and commits.
 * </ol>
 *
 * <p>{@code --group-protocol consumer} runs the same on KIP-848's consumer group protocol
 * (ConsumerGroupHeartbeat, the assignment computed by the coordinator) instead of the classic
 * one; the AdminClient's describeConsumerGroups (ConsumerGroupDescribe) then says what the
 * coordinator holds once the partitions are split ({@code described_split}) and after the
 * leave ({@code described_after_leave}).
 */
final class GroupRebalance {
    private GroupRebalance() {}

    /** One consumer, what it was assigned and revoked, and what it read in the current phase. */
    private static final class Member implements ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final List<Map<String, Object>> events = new ArrayList<>();
        List<Map<String, Object>> read = new ArrayList<>();

        Member(String name, JavaClients.Options options, String group) {
            this.name = name;
            Properties config = JavaClients.consumerConfig(options, group, "java-" + name);
            if (options.get("group-protocol", "classic").equals("consumer")) {
                config.put("group.protocol", "consumer");
                // The coordinator sets these on the consumer protocol; the client refuses them.
                config.remove(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG);
                config.remove(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG);
            }
            this.consumer = new KafkaConsumer<>(config);
        }

        void poll() {
            for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                read.add(JavaClients.record(record));
            }
        }

        List<Integer> assignment() {
            return JavaClients.partitions(consumer.assignment());
        }

        private void event(String kind, Collection<TopicPartition> partitions) {
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("event", kind);
            event.put("partitions", JavaClients.partitions(partitions));
            events.add(event);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            event("revoked", partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            event("assigned", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            event("lost", partitions);
        }
    }

    static Map<String, Object> run(JavaClients.Options options) throws Exception {
        String topic = options.get("topic");
        String group = options.get("group");
        int partitions = options.integer("partitions");
        int count = options.integer("count");
        Map<String, Object> result = new LinkedHashMap<>();
        boolean consumerProtocol = options.get("group-protocol", "classic").equals("consumer");
        Member first = new Member("first", options, group);
        Member second = new Member("second", options, group);
        Properties adminConfig = new Properties();
        adminConfig.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap"));
        try (Admin admin = Admin.create(adminConfig);
                KafkaProducer<String, String> producer =
                new KafkaProducer<>(JavaClients.producerConfig(options, "java-group-producer"))) {
            first.consumer.subscribe(Collections.singletonList(topic), first);
            JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (first.assignment().size() < partitions) {
                deadline.check("the first member to be given every partition, has " + first.assignment());
                first.poll();
            }
            result.put("alone", first.assignment());

            second.consumer.subscribe(Collections.singletonList(topic), second);
            deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (!split(first.assignment(), second.assignment(), partitions)) {
                deadline.check("a split, have " + first.assignment() + " and " + second.assignment());
                first.poll();
                second.poll();
            }
            Map<String, Object> split = new LinkedHashMap<>();
            split.put("first", first.assignment());
            split.put("second", second.assignment());
            result.put("split", split);
            if (consumerProtocol) {
                result.put("described_split", describe(admin, group, first.assignment(), second.assignment()));
            }

            produce(producer, topic, partitions, count, "split");
            deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (first.read.size() + second.read.size() < count) {
                deadline.check(count + " records, have " + (first.read.size() + second.read.size()));
                first.poll();
                second.poll();
            }
            first.consumer.commitSync();
            second.consumer.commitSync();
            Map<String, Object> splitRead = new LinkedHashMap<>();
            splitRead.put("first", first.read);
            splitRead.put("second", second.read);
            result.put("split_read", splitRead);
            result.put("second_committed", committed(second.consumer));

            second.consumer.close();
            first.read = new ArrayList<>();
            deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (first.assignment().size() < partitions) {
                deadline.check("the first member to take every partition back, has " + first.assignment());
                first.poll();
            }
            result.put("after_leave", first.assignment());
            if (consumerProtocol) {
                result.put("described_after_leave", describe(admin, group, first.assignment()));
            }

            produce(producer, topic, partitions, count, "after-leave");
            deadline = new JavaClients.Deadline(JavaClients.WAIT);
            while (first.read.size() < count) {
                deadline.check(count + " records after the leave, have " + first.read.size());
                first.poll();
            }
            first.consumer.commitSync();
            result.put("after_leave_read", first.read);
            result.put("first_committed", committed(first.consumer));
            Map<String, Object> events = new LinkedHashMap<>();
            events.put("first", first.events);
            events.put("second", second.events);
            result.put("events", events);
        } finally {
            first.consumer.close();
            second.consumer.close();
        }
        return result;
    }

    /**
     * The group as describeConsumerGroups shows it once its members' assignments, by client
     * id, are the {@code owned} partitions: a member acknowledges what it was given on its
     * next heartbeat, so the coordinator's view may lag the clients' by one.
     */
    private static Map<String, Object> describe(Admin admin, String group, List<?>... owned) throws Exception {
        JavaClients.Deadline deadline = new JavaClients.Deadline(JavaClients.WAIT);
        while (true) {
            ConsumerGroupDescription description =
                    admin.describeConsumerGroups(Collections.singletonList(group)).all().get().get(group);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("type", description.type().name());
            out.put("state", description.state().name());
            out.put("assignor", description.partitionAssignor());
            out.put("coordinator", description.coordinator().id());
            Map<String, Object> members = new TreeMap<>();
            for (MemberDescription member : description.members()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("consumer_id", member.consumerId());
                m.put("host", member.host());
                m.put("partitions", JavaClients.partitions(member.assignment().topicPartitions()));
                members.put(member.clientId(), m);
            }
            out.put("members", members);
            List<Object> assignments = new ArrayList<>();
            for (Object m : members.values()) assignments.add(((Map<?, ?>) m).get("partitions"));
            if (assignments.equals(Arrays.asList(owned)) || deadline.passed()) return out;
            Thread.sleep(100);
        }
    }

    /** Both members have partitions, none twice, and all of them between the two. */
    private static boolean split(List<Integer> a, List<Integer> b, int partitions) {
        Set<Integer> all = new HashSet<>(a);
        all.addAll(b);
        return !a.isEmpty() && !b.isEmpty() && a.size() + b.size() == partitions && all.size() == partitions;
    }

    private static void produce(
            KafkaProducer<String, String> producer, String topic, int partitions, int count, String phase)
            throws Exception {
        List<Future<RecordMetadata>> sends = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sends.add(producer.send(new ProducerRecord<>(topic, i % partitions, phase + "-" + i, "value-" + i)));
        }
        for (Future<RecordMetadata> send : sends) send.get(30, TimeUnit.SECONDS);
    }

    private static Map<String, Object> committed(KafkaConsumer<String, String> consumer) {
        Map<TopicPartition, Long> offsets = new LinkedHashMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                consumer.committed(consumer.assignment()).entrySet()) {
            offsets.put(e.getKey(), e.getValue() == null ? null : e.getValue().offset());
        }
        return JavaClients.byPartition(offsets);
    }
}
