// IBM/sarama against Purgatory: an idempotent producer with acks=all and keys, reading
// every record back, a ConsumerGroup of two members splitting a topic, and the
// ClusterAdmin creating, describing and deleting topics.
package sarama_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"purgatory.dev/tests/go/internal/cluster"
)

const partitions = 3

func config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "purgatory-sarama"
	cfg.Version = sarama.V3_9_0_0
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Return.Successes = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	return cfg
}

func admin(t *testing.T, seeds []string) sarama.ClusterAdmin {
	t.Helper()
	adm, err := sarama.NewClusterAdmin(seeds, config())
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	return adm
}

func createTopic(t *testing.T, adm sarama.ClusterAdmin, topic string) {
	t.Helper()
	detail := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 3}
	if err := adm.CreateTopic(topic, detail, false); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

type acked struct {
	key       string
	partition int32
	offset    int64
}

// produce sends count keyed records with a sync producer and returns their acknowledgements.
func produce(t *testing.T, seeds []string, topic, prefix string, count int) []acked {
	t.Helper()
	producer, err := sarama.NewSyncProducer(seeds, config())
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer func() { _ = producer.Close() }()
	var out []acked
	for i := range count {
		key := fmt.Sprintf("%s-%d", prefix, i)
		partition, offset, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic:   topic,
			Key:     sarama.StringEncoder(key),
			Value:   sarama.StringEncoder("value-" + key),
			Headers: []sarama.RecordHeader{{Key: []byte("seq"), Value: fmt.Appendf(nil, "%d", i)}},
		})
		if err != nil {
			t.Fatalf("send %s: %v", key, err)
		}
		out = append(out, acked{key, partition, offset})
	}
	return out
}

func TestSaramaIdempotentProducerAcksAllAndEveryRecordReadsBack(t *testing.T) {
	seeds := cluster.Seeds(t)
	topic := cluster.Name("sarama-produce")
	createTopic(t, admin(t, seeds), topic)
	const count = 30
	sent := produce(t, seeds, topic, "key", count)

	byPartition := map[int32][]acked{}
	for _, a := range sent {
		byPartition[a.partition] = append(byPartition[a.partition], a)
	}
	if len(byPartition) != partitions {
		t.Fatalf("keys hashed to %d partitions, want %d", len(byPartition), partitions)
	}
	consumer, err := sarama.NewConsumer(seeds, config())
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer func() { _ = consumer.Close() }()
	for partition, want := range byPartition {
		// Acknowledged at consecutive offsets from 0 in the order sent.
		for i, a := range want {
			if a.offset != int64(i) {
				t.Fatalf("partition %d: record %d acknowledged at offset %d", partition, i, a.offset)
			}
		}
		pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume partition %d: %v", partition, err)
		}
		for _, a := range want {
			select {
			case m := <-pc.Messages():
				if string(m.Key) != a.key || string(m.Value) != "value-"+a.key || m.Offset != a.offset {
					t.Fatalf("partition %d read %s=%s at %d, want %s at %d",
						partition, m.Key, m.Value, m.Offset, a.key, a.offset)
				}
				if len(m.Headers) != 1 || string(m.Headers[0].Key) != "seq" {
					t.Fatalf("headers %v", m.Headers)
				}
			case err := <-pc.Errors():
				t.Fatalf("partition %d: %v", partition, err)
			case <-time.After(20 * time.Second):
				t.Fatalf("partition %d: %s not read within 20s", partition, a.key)
			}
		}
		_ = pc.Close()
	}
}

// member is one ConsumerGroup member; it records what each session assigned it and
// every record it read, marking (and so committing at session end) each one.
type member struct {
	mu       sync.Mutex
	sessions [][]int32
	read     map[int32][]int64
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	owned := slices.Clone(s.Claims()[topicOf(s)])
	slices.Sort(owned)
	m.sessions = append(m.sessions, owned)
	return nil
}

func (m *member) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		m.mu.Lock()
		m.read[msg.Partition] = append(m.read[msg.Partition], msg.Offset)
		m.mu.Unlock()
		s.MarkMessage(msg, "")
		s.Commit()
	}
	return nil
}

func (m *member) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sessions) == 0 {
		return nil
	}
	return m.sessions[len(m.sessions)-1]
}

func (m *member) offsets(partition int32) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.read[partition])
}

func (m *member) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, offsets := range m.read {
		n += len(offsets)
	}
	return n
}

func topicOf(s sarama.ConsumerGroupSession) string {
	for topic := range s.Claims() {
		return topic
	}
	return ""
}

// join starts a member consuming topic in group until ctx ends; done closes when it left.
func join(t *testing.T, seeds []string, group, topic string, ctx context.Context) (*member, <-chan struct{}) {
	t.Helper()
	cg, err := sarama.NewConsumerGroup(seeds, group, config())
	if err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	m := &member{read: map[int32][]int64{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = cg.Close() }()
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				t.Errorf("consume: %v", err)
				return
			}
		}
	}()
	return m, done
}

func TestSaramaConsumerGroupOfTwoSplitsTheTopicAndCommitsWhatItRead(t *testing.T) {
	seeds := cluster.Seeds(t)
	topic, group := cluster.Name("sarama-group"), cluster.Name("sarama-group")
	adm := admin(t, seeds)
	createTopic(t, adm, topic)

	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	a, doneA := join(t, seeds, group, topic, ctxA)
	cluster.Eventually(t, 30*time.Second, func() error {
		if got := a.owned(); len(got) != partitions {
			return fmt.Errorf("the first member owns %v, want all %d partitions", got, partitions)
		}
		return nil
	})
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	b, doneB := join(t, seeds, group, topic, ctxB)
	cluster.Eventually(t, 30*time.Second, func() error {
		ownedA, ownedB := a.owned(), b.owned()
		union := slices.Sorted(slices.Values(append(slices.Clone(ownedA), ownedB...)))
		if len(ownedA) == 0 || len(ownedB) == 0 || !slices.Equal(union, []int32{0, 1, 2}) {
			return fmt.Errorf("members own %v and %v, want a split of [0 1 2]", ownedA, ownedB)
		}
		return nil
	})

	const count = 30
	sent := produce(t, seeds, topic, "group", count)
	cluster.Eventually(t, 30*time.Second, func() error {
		if n := a.count() + b.count(); n != count {
			return fmt.Errorf("the members read %d records, want %d", n, count)
		}
		return nil
	})
	ends := map[int32]int64{}
	for _, s := range sent {
		ends[s.partition] = max(ends[s.partition], s.offset+1)
	}
	for name, m := range map[string]*member{"first": a, "second": b} {
		for _, p := range m.owned() {
			offsets := m.offsets(p)
			if int64(len(offsets)) != ends[p] || offsets[0] != 0 {
				t.Errorf("the %s member read offsets %v of partition %d, want 0..%d", name, offsets, p, ends[p]-1)
			}
		}
	}
	stopB()
	<-doneB
	stopA()
	<-doneA

	committed, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
	if err != nil {
		t.Fatalf("list group offsets: %v", err)
	}
	for p := range int32(partitions) {
		block := committed.GetBlock(topic, p)
		if block == nil || block.Err != sarama.ErrNoError || block.Offset != ends[p] {
			t.Errorf("partition %d committed %+v, want offset %d", p, block, ends[p])
		}
	}
	groups, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil || len(groups) != 1 {
		t.Fatalf("describe group: %v %v", groups, err)
	}
	if groups[0].State != "Empty" || len(groups[0].Members) != 0 {
		t.Errorf("after both left the group is %s with %d members, want Empty", groups[0].State, len(groups[0].Members))
	}
}

func TestSaramaClusterAdminCreatesDescribesAndDeletesTopics(t *testing.T) {
	seeds := cluster.Seeds(t)
	adm := admin(t, seeds)
	topic := cluster.Name("sarama-admin")
	retention := "3600000"
	detail := &sarama.TopicDetail{
		NumPartitions:     partitions,
		ReplicationFactor: 3,
		ConfigEntries:     map[string]*string{"retention.ms": &retention},
	}
	if err := adm.CreateTopic(topic, detail, false); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := adm.CreateTopic(topic, detail, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("creating it again: %v, want %v", err, sarama.ErrTopicAlreadyExists)
	}
	topics, err := adm.ListTopics()
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	listed, ok := topics[topic]
	if !ok || listed.NumPartitions != partitions || listed.ReplicationFactor != 3 {
		t.Errorf("listed %+v (present: %v)", listed, ok)
	}
	described, err := adm.DescribeTopics([]string{topic})
	if err != nil || len(described) != 1 || described[0].Err != sarama.ErrNoError {
		t.Fatalf("describe: %v %v", described, err)
	}
	for _, p := range described[0].Partitions {
		if len(p.Replicas) != 3 || len(p.Isr) != 3 || !slices.Contains(p.Replicas, p.Leader) {
			t.Errorf("partition %d: leader %d replicas %v isr %v", p.ID, p.Leader, p.Replicas, p.Isr)
		}
	}
	configs, err := adm.DescribeConfig(sarama.ConfigResource{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"},
	})
	if err != nil || len(configs) != 1 || configs[0].Value != retention {
		t.Errorf("retention.ms described as %+v (%v), want %s", configs, err, retention)
	}
	if err := adm.DeleteTopic(topic); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := adm.DeleteTopic(topic); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Errorf("deleting it again: %v, want %v", err, sarama.ErrUnknownTopicOrPartition)
	}
	cluster.Eventually(t, 10*time.Second, func() error {
		topics, err := adm.ListTopics()
		if err != nil {
			return err
		}
		if _, ok := topics[topic]; ok {
			return fmt.Errorf("%s still listed after its deletion", topic)
		}
		return nil
	})
}
