// segmentio/kafka-go against Purgatory: a Writer with acks=all and hashed keys, Readers
// reading every partition back, a Reader with a GroupID committing what it read, and the
// Client's topic administration.
package kafkago_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"purgatory.dev/tests/go/internal/cluster"
)

const partitions = 3

func client(seeds []string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(seeds...), Timeout: 20 * time.Second}
}

func createTopic(t *testing.T, cl *kafka.Client, topic string, configs ...kafka.ConfigEntry) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: partitions, ReplicationFactor: 3, ConfigEntries: configs,
	}}})
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	return resp.Errors[topic]
}

// produce writes count keyed records with acks=all and returns each one as acknowledged
// (its partition and offset filled in).
func produce(t *testing.T, seeds []string, topic string, count int) []kafka.Message {
	t.Helper()
	var mu sync.Mutex
	var acked []kafka.Message
	w := &kafka.Writer{
		Addr:         kafka.TCP(seeds...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
		Completion: func(messages []kafka.Message, err error) {
			if err != nil {
				t.Errorf("write completion: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			acked = append(acked, messages...)
		},
	}
	msgs := make([]kafka.Message, count)
	for i := range msgs {
		key := fmt.Sprintf("key-%d", i)
		msgs[i] = kafka.Message{
			Key:     []byte(key),
			Value:   []byte("value-" + key),
			Headers: []kafka.Header{{Key: "seq", Value: fmt.Appendf(nil, "%d", i)}},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := w.Close(); err != nil { // waits for the Completion calls
		t.Fatalf("close writer: %v", err)
	}
	if len(acked) != count {
		t.Fatalf("%d records acknowledged, want %d", len(acked), count)
	}
	return acked
}

func TestKafkaGoWriterAcksAllAndPartitionReadersReadEveryRecordBack(t *testing.T) {
	seeds := cluster.Seeds(t)
	topic := cluster.Name("kafkago-produce")
	if err := createTopic(t, client(seeds), topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	acked := produce(t, seeds, topic, 30)
	byPartition := map[int][]kafka.Message{}
	for _, m := range acked {
		byPartition[m.Partition] = append(byPartition[m.Partition], m)
	}
	if len(byPartition) != partitions {
		t.Fatalf("keys hashed to %d partitions, want %d", len(byPartition), partitions)
	}
	for partition, want := range byPartition {
		slices.SortFunc(want, func(a, b kafka.Message) int { return int(a.Offset - b.Offset) })
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: seeds, Topic: topic, Partition: partition, MaxWait: 500 * time.Millisecond,
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for i, w := range want {
			if w.Offset != int64(i) {
				t.Fatalf("partition %d: acknowledged offsets %d.. are not consecutive from 0", partition, w.Offset)
			}
			got, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d: read: %v", partition, err)
			}
			if got.Offset != w.Offset || string(got.Key) != string(w.Key) || string(got.Value) != string(w.Value) {
				t.Fatalf("partition %d read %s=%s at %d, want %s at %d",
					partition, got.Key, got.Value, got.Offset, w.Key, w.Offset)
			}
			if len(got.Headers) != 1 || got.Headers[0].Key != "seq" {
				t.Fatalf("headers %v", got.Headers)
			}
		}
		cancel()
		_ = r.Close()
	}
}

func TestKafkaGoGroupReaderReadsEveryRecordAndCommitsItsPosition(t *testing.T) {
	seeds := cluster.Seeds(t)
	cl := client(seeds)
	topic, group := cluster.Name("kafkago-group"), cluster.Name("kafkago-group")
	if err := createTopic(t, cl, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	const count = 30
	acked := produce(t, seeds, topic, count)
	ends := map[int]int64{}
	for _, m := range acked {
		ends[m.Partition] = max(ends[m.Partition], m.Offset+1)
	}

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     seeds,
		Topic:       topic,
		GroupID:     group,
		StartOffset: kafka.FirstOffset,
		MaxWait:     500 * time.Millisecond,
		// CommitInterval 0: every ReadMessage commits before it returns.
	})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for range count {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read after %d records: %v", len(seen), err)
		}
		if seen[string(m.Key)] {
			t.Fatalf("%s read twice", m.Key)
		}
		seen[string(m.Key)] = true
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close reader: %v", err)
	}

	fetched, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{
		GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}},
	})
	if err != nil || fetched.Error != nil {
		t.Fatalf("offset fetch: %v %v", err, fetched)
	}
	committed := map[int]int64{}
	for _, p := range fetched.Topics[topic] {
		if p.Error != nil {
			t.Errorf("partition %d: %v", p.Partition, p.Error)
		}
		committed[p.Partition] = p.CommittedOffset
	}
	for p := range partitions {
		if committed[p] != ends[p] {
			t.Errorf("partition %d committed at %d, want %d (all: %v)", p, committed[p], ends[p], committed)
		}
	}
	described, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil || len(described.Groups) != 1 {
		t.Fatalf("describe group: %v %v", described, err)
	}
	if g := described.Groups[0]; g.GroupState != "Empty" || len(g.Members) != 0 {
		t.Errorf("after the reader closed the group is %s with %d members, want Empty", g.GroupState, len(g.Members))
	}
}

func TestKafkaGoClientCreatesDescribesAndDeletesTopics(t *testing.T) {
	seeds := cluster.Seeds(t)
	cl := client(seeds)
	topic := cluster.Name("kafkago-admin")
	retention := kafka.ConfigEntry{ConfigName: "retention.ms", ConfigValue: "3600000"}
	if err := createTopic(t, cl, topic, retention); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if err := createTopic(t, cl, topic, retention); !errors.Is(err, kafka.TopicAlreadyExists) {
		t.Errorf("creating it again: %v, want %v", err, kafka.TopicAlreadyExists)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(meta.Topics) != 1 || meta.Topics[0].Error != nil {
		t.Fatalf("metadata: %v %+v", err, meta)
	}
	if len(meta.Brokers) != 3 {
		t.Errorf("metadata names %d brokers, want 3", len(meta.Brokers))
	}
	if got := len(meta.Topics[0].Partitions); got != partitions {
		t.Errorf("%d partitions, want %d", got, partitions)
	}
	for _, p := range meta.Topics[0].Partitions {
		if len(p.Replicas) != 3 || len(p.Isr) != 3 {
			t.Errorf("partition %d: replicas %v isr %v", p.ID, p.Replicas, p.Isr)
		}
	}
	configs, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms"},
		}},
	})
	if err != nil || len(configs.Resources) != 1 || configs.Resources[0].Error != nil {
		t.Fatalf("describe configs: %v %+v", err, configs)
	}
	entries := configs.Resources[0].ConfigEntries
	if len(entries) != 1 || entries[0].ConfigValue != "3600000" || entries[0].IsDefault {
		t.Errorf("retention.ms described as %+v, want 3600000 set on the topic", entries)
	}
	for attempt, want := range []error{nil, kafka.UnknownTopicOrPartition} {
		deleted, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
		if got := deleted.Errors[topic]; !errors.Is(got, want) {
			t.Errorf("delete #%d: %v, want %v", attempt+1, got, want)
		}
	}
	cluster.Eventually(t, 10*time.Second, func() error {
		meta, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return err
		}
		if len(meta.Topics) != 1 || !errors.Is(meta.Topics[0].Error, kafka.UnknownTopicOrPartition) {
			return fmt.Errorf("after deletion metadata says %+v", meta.Topics)
		}
		return nil
	})
}
