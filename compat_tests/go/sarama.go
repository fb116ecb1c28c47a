package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

func saramaScenarios() []scenario {
	s := []scenario{
		{"admin-create-topics", saramaCreateTopics},
		{"admin-create-topic-errors", saramaCreateTopicErrors},
		{"admin-list-topics", saramaListTopics},
		{"admin-describe-topics", saramaDescribeTopics},
		{"admin-describe-cluster", saramaDescribeCluster},
		{"admin-create-partitions", saramaCreatePartitions},
		{"admin-describe-configs", saramaDescribeConfigs},
		{"admin-delete-topics", saramaDeleteTopics},
		{"admin-list-offsets", saramaListOffsets},
		{"produce-keyed-ordering", saramaKeyedOrdering},
		{"produce-acks-0", func(ctx context.Context, e *env) error { return saramaAcks(ctx, e, sarama.NoResponse) }},
		{"produce-acks-1", func(ctx context.Context, e *env) error { return saramaAcks(ctx, e, sarama.WaitForLocal) }},
	}
	for _, codec := range codecs {
		s = append(s, scenario{"compression-" + codec, func(ctx context.Context, e *env) error { return saramaCompression(ctx, e, codec) }})
	}
	return append(s,
		scenario{"consume-from-beginning", saramaConsumeFromBeginning},
		scenario{"consume-from-offset", saramaConsumeFromOffset},
		scenario{"consume-from-timestamp", saramaConsumeFromTimestamp},
		scenario{"large-message", saramaLargeMessage},
		scenario{"error-unknown-topic", saramaUnknownTopic},
		scenario{"error-record-too-large", saramaRecordTooLarge},
		scenario{"error-offset-out-of-range", saramaOffsetOutOfRange},
		scenario{"group", saramaGroup},
		scenario{"transactions", saramaTransactions},
	)
}

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V4_0_0_0
	c.ClientID = "kafkalike-compat"
	c.Net.DialTimeout = 10 * time.Second
	c.Net.ReadTimeout = 30 * time.Second
	c.Net.WriteTimeout = 30 * time.Second
	c.Metadata.AllowAutoTopicCreation = false
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Admin.Timeout = 20 * time.Second
	return c
}

func saramaAdmin(e *env) (sarama.ClusterAdmin, error) {
	return sarama.NewClusterAdmin([]string{e.bootstrap}, saramaConfig())
}

func saramaCreate(e *env, topic string, partitions int32, configs map[string]*string) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs}, false)
}

func saramaMessage(topic string, m msg) *sarama.ProducerMessage {
	pm := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(m.value), Timestamp: m.timestamp}
	if m.key != nil {
		pm.Key = sarama.ByteEncoder(m.key)
	}
	for _, h := range m.headers() {
		pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(h.key), Value: h.value})
	}
	return pm
}

func saramaProduce(e *env, cfg *sarama.Config, topic string, msgs []msg) error {
	producer, err := sarama.NewSyncProducer([]string{e.bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer producer.Close()
	batch := make([]*sarama.ProducerMessage, len(msgs))
	for i, m := range msgs {
		batch[i] = saramaMessage(topic, m)
	}
	return producer.SendMessages(batch)
}

// saramaConsume reads count records in all from the given start offsets (no group).
func saramaConsume(ctx context.Context, e *env, topic string, starts map[int32]int64, count int) ([]got, error) {
	consumer, err := sarama.NewConsumer([]string{e.bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	out := make(chan got, count+16)
	errs := make(chan error, 16)
	var pcs []sarama.PartitionConsumer
	defer func() {
		for _, pc := range pcs {
			pc.AsyncClose()
		}
	}()
	for p, offset := range starts {
		pc, err := consumer.ConsumePartition(topic, p, offset)
		if err != nil {
			return nil, err
		}
		pcs = append(pcs, pc)
		go func(pc sarama.PartitionConsumer) {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					g := got{partition: m.Partition, offset: m.Offset, key: m.Key, value: m.Value, timestamp: m.Timestamp}
					for _, h := range m.Headers {
						g.headers = append(g.headers, header{string(h.Key), h.Value})
					}
					select {
					case out <- g:
					default:
					}
				case err, ok := <-pc.Errors():
					if !ok {
						return
					}
					select {
					case errs <- err:
					default:
					}
				}
			}
		}(pc)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var received []got
	for len(received) < count {
		select {
		case g := <-out:
			received = append(received, g)
		case err := <-errs:
			return received, err
		case <-ctx.Done():
			return received, fmt.Errorf("expected %d records, got %d within 30 s", count, len(received))
		}
	}
	return received, nil
}

func oldest(partitions int32) map[int32]int64 {
	m := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		m[p] = sarama.OffsetOldest
	}
	return m
}

func saramaCreateTopics(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	a, b := e.topic("a"), e.topic("b")
	if err := adm.CreateTopic(a, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		return err
	}
	retention := "3600000"
	if err := adm.CreateTopic(b, &sarama.TopicDetail{NumPartitions: -1, ReplicationFactor: -1, ConfigEntries: map[string]*string{"retention.ms": &retention}}, false); err != nil {
		return err
	}
	return eventually(func() error {
		md, err := adm.DescribeTopics([]string{a, b})
		if err != nil {
			return err
		}
		return checkf(len(md) == 2 && len(md[0].Partitions) == 3 && md[0].Err == sarama.ErrNoError && md[1].Err == sarama.ErrNoError && len(md[1].Partitions) >= 1,
			"describe after create: %v %v", md[0].Err, md[1].Err)
	})
}

func saramaCreateTopicErrors(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	a := e.topic("a")
	one := &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}
	if err := adm.CreateTopic(a, one, false); err != nil {
		return err
	}
	if err := adm.CreateTopic(a, one, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("existing topic: want ErrTopicAlreadyExists, got %v", err)
	}
	if err := adm.CreateTopic(e.topic("rf"), &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 3}, false); !errors.Is(err, sarama.ErrInvalidReplicationFactor) {
		return fmt.Errorf("rf 3: want ErrInvalidReplicationFactor, got %v", err)
	}
	if err := adm.CreateTopic("bad/"+e.suffix, one, false); !errors.Is(err, sarama.ErrInvalidTopic) {
		return fmt.Errorf("bad name: want ErrInvalidTopic, got %v", err)
	}
	v := e.topic("validate")
	if err := adm.CreateTopic(v, one, true); err != nil {
		return fmt.Errorf("validate only: %w", err)
	}
	topics, err := adm.ListTopics()
	if err != nil {
		return err
	}
	_, exists := topics[v]
	return checkf(!exists, "validate-only created the topic")
}

func saramaListTopics(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	a := e.topic("a")
	if err := adm.CreateTopic(a, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		return err
	}
	topics, err := adm.ListTopics()
	if err != nil {
		return err
	}
	d, ok := topics[a]
	if !ok {
		return errors.New("ListTopics lacks the new topic")
	}
	// Sarama lists every topic the metadata has, internal ones (__consumer_offsets) included.
	for name := range topics {
		if strings.HasPrefix(name, "__cluster_metadata") {
			return fmt.Errorf("ListTopics shows the metadata log %s", name)
		}
	}
	return checkf(d.NumPartitions == 2 && d.ReplicationFactor == 1, "detail %+v", d)
}

func saramaDescribeTopics(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	a := e.topic("a")
	if err := adm.CreateTopic(a, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		return err
	}
	var md []*sarama.TopicMetadata
	if err := eventually(func() error {
		var err error
		if md, err = adm.DescribeTopics([]string{a}); err != nil {
			return err
		}
		return checkf(len(md) == 1 && md[0].Err == sarama.ErrNoError && len(md[0].Partitions) == 3, "describe %+v", md)
	}); err != nil {
		return err
	}
	for _, p := range md[0].Partitions {
		if p.Err != sarama.ErrNoError || p.Leader < 0 || len(p.Replicas) != 1 || len(p.Isr) != 1 {
			return fmt.Errorf("partition %+v", p)
		}
	}
	missing, err := adm.DescribeTopics([]string{e.topic("missing")})
	if err != nil {
		return err
	}
	return checkf(len(missing) == 1 && missing[0].Err == sarama.ErrUnknownTopicOrPartition, "unknown topic described as %v", missing[0].Err)
}

func saramaDescribeCluster(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	brokers, controller, err := adm.DescribeCluster()
	if err != nil {
		return err
	}
	return checkf(len(brokers) == 1 && brokers[0].ID() == controller && brokers[0].Addr() == e.bootstrap,
		"brokers %d, controller %d", len(brokers), controller)
}

func saramaCreatePartitions(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	a := e.topic("a")
	if err := adm.CreateTopic(a, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		return err
	}
	if err := adm.CreatePartitions(a, 4, nil, false); err != nil {
		return err
	}
	if err := adm.CreatePartitions(a, 2, nil, false); !errors.Is(err, sarama.ErrInvalidPartitions) {
		return fmt.Errorf("shrink: want ErrInvalidPartitions, got %v", err)
	}
	return eventually(func() error {
		md, err := adm.DescribeTopics([]string{a})
		if err != nil {
			return err
		}
		return checkf(len(md[0].Partitions) == 4, "partition count %d", len(md[0].Partitions))
	})
}

func saramaDescribeConfigs(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	a := e.topic("a")
	retention := "123456"
	if err := adm.CreateTopic(a, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &retention}}, false); err != nil {
		return err
	}
	values := map[string]sarama.ConfigEntry{}
	// Apache Kafka knows a new topic's configs a moment after CreateTopics returns.
	if err := eventually(func() error {
		entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: a})
		if err != nil {
			return err
		}
		for _, c := range entries {
			values[c.Name] = c
		}
		c := values["retention.ms"]
		return checkf(c.Value == "123456" && c.Source == sarama.SourceTopic, "retention.ms %q from %v", c.Value, c.Source)
	}); err != nil {
		return err
	}
	if c := values["cleanup.policy"]; c.Value != "delete" || !c.Default {
		return fmt.Errorf("cleanup.policy %q default=%v", c.Value, c.Default)
	}
	brokers, controller, err := adm.DescribeCluster()
	if err != nil || len(brokers) == 0 {
		return fmt.Errorf("describe cluster: %v", err)
	}
	_ = controller
	brokerEntries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: fmt.Sprint(brokers[0].ID())})
	if err != nil {
		return err
	}
	return checkf(len(brokerEntries) > 0, "no broker configs")
}

func saramaDeleteTopics(ctx context.Context, e *env) error {
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	a := e.topic("a")
	if err := adm.CreateTopic(a, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		return err
	}
	if err := adm.DeleteTopic(a); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		topics, err := adm.ListTopics()
		if err != nil {
			return err
		}
		if _, ok := topics[a]; !ok {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("topic still listed after delete")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := adm.DeleteTopic(a); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("delete again: want ErrUnknownTopicOrPartition, got %v", err)
	}
	return nil
}

func saramaListOffsets(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 1, nil); err != nil {
		return err
	}
	msgs := messages(10, 3)
	if err := saramaProduce(e, saramaConfig(), a, msgs); err != nil {
		return err
	}
	client, err := sarama.NewClient([]string{e.bootstrap}, saramaConfig())
	if err != nil {
		return err
	}
	defer client.Close()
	first, err := client.GetOffset(a, 0, sarama.OffsetOldest)
	if err != nil {
		return err
	}
	last, err := client.GetOffset(a, 0, sarama.OffsetNewest)
	if err != nil {
		return err
	}
	byTime, err := client.GetOffset(a, 0, msgs[4].timestamp.UnixMilli()-5)
	if err != nil {
		return err
	}
	return checkf(first == 0 && last == 10 && byTime == 4, "oldest %d newest %d by time %d", first, last, byTime)
}

func saramaKeyedOrdering(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 3, nil); err != nil {
		return err
	}
	msgs := messages(2000, 20)
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Flush.Bytes = 4096
	if err := saramaProduce(e, cfg, a, msgs); err != nil {
		return err
	}
	received, err := saramaConsume(ctx, e, a, oldest(3), len(msgs))
	if err != nil {
		return err
	}
	return checkRoundTrip(msgs, received, 3)
}

func saramaAcks(ctx context.Context, e *env, acks sarama.RequiredAcks) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 2, nil); err != nil {
		return err
	}
	// Nothing reports an acks=0 record lost: wait until both partitions' leaders answer ListOffsets.
	client, err := sarama.NewClient([]string{e.bootstrap}, saramaConfig())
	if err != nil {
		return err
	}
	err = eventually(func() error {
		for p := int32(0); p < 2; p++ {
			if _, err := client.GetOffset(a, p, sarama.OffsetNewest); err != nil {
				return err
			}
		}
		return nil
	})
	client.Close()
	if err != nil {
		return err
	}
	msgs := messages(100, 5)
	cfg := saramaConfig()
	cfg.Producer.RequiredAcks = acks
	if err := saramaProduce(e, cfg, a, msgs); err != nil {
		return err
	}
	received, err := saramaConsume(ctx, e, a, oldest(2), len(msgs))
	if err != nil {
		return err
	}
	return checkRoundTrip(msgs, received, 2)
}

func saramaCompression(ctx context.Context, e *env, codec string) error {
	c := map[string]sarama.CompressionCodec{
		"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
		"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
	}[codec]
	a := e.topic("a")
	if err := saramaCreate(e, a, 3, nil); err != nil {
		return err
	}
	msgs := messages(300, 5)
	cfg := saramaConfig()
	cfg.Producer.Compression = c
	cfg.Producer.Flush.Frequency = 20 * time.Millisecond
	if err := saramaProduce(e, cfg, a, msgs); err != nil {
		return err
	}
	received, err := saramaConsume(ctx, e, a, oldest(3), len(msgs))
	if err != nil {
		return err
	}
	return checkRoundTrip(msgs, received, 3)
}

func saramaConsumeFromBeginning(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 2, nil); err != nil {
		return err
	}
	msgs := messages(50, 4)
	if err := saramaProduce(e, saramaConfig(), a, msgs); err != nil {
		return err
	}
	received, err := saramaConsume(ctx, e, a, oldest(2), len(msgs))
	if err != nil {
		return err
	}
	return checkRoundTrip(msgs, received, 2)
}

func saramaConsumeFromOffset(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 1, nil); err != nil {
		return err
	}
	msgs := messages(30, 3)
	cfg := saramaConfig()
	cfg.Producer.Compression = sarama.CompressionLZ4
	if err := saramaProduce(e, cfg, a, msgs); err != nil {
		return err
	}
	received, err := saramaConsume(ctx, e, a, map[int32]int64{0: 17}, 13)
	if err != nil {
		return err
	}
	for i, r := range received {
		if r.offset != int64(17+i) || indexOf(r.value) != 17+i {
			return fmt.Errorf("record %d after offset 17: offset %d index %d", i, r.offset, indexOf(r.value))
		}
	}
	return nil
}

func saramaConsumeFromTimestamp(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 1, nil); err != nil {
		return err
	}
	msgs := messages(20, 3)
	cfg := saramaConfig()
	cfg.Producer.Compression = sarama.CompressionGZIP
	if err := saramaProduce(e, cfg, a, msgs); err != nil {
		return err
	}
	client, err := sarama.NewClient([]string{e.bootstrap}, saramaConfig())
	if err != nil {
		return err
	}
	offset, err := client.GetOffset(a, 0, msgs[11].timestamp.UnixMilli()-5)
	client.Close()
	if err != nil {
		return err
	}
	if offset != 11 {
		return fmt.Errorf("offset for timestamp: %d, want 11", offset)
	}
	received, err := saramaConsume(ctx, e, a, map[int32]int64{0: offset}, 9)
	if err != nil {
		return err
	}
	for i, r := range received {
		if !r.timestamp.Equal(msgs[11+i].timestamp) {
			return fmt.Errorf("record %d: timestamp %v, want %v", 11+i, r.timestamp, msgs[11+i].timestamp)
		}
	}
	return nil
}

func saramaLargeMessage(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 1, nil); err != nil {
		return err
	}
	big := make([]byte, 900*1024)
	rand.New(rand.NewSource(42)).Read(big)
	producer, err := sarama.NewSyncProducer([]string{e.bootstrap}, saramaConfig())
	if err != nil {
		return err
	}
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: a, Key: sarama.StringEncoder("big"), Value: sarama.ByteEncoder(big)})
	if err == nil {
		_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: a, Value: sarama.StringEncoder("after")})
	}
	producer.Close()
	if err != nil {
		return err
	}
	received, err := saramaConsume(ctx, e, a, oldest(1), 2)
	if err != nil {
		return err
	}
	return checkf(bytes.Equal(received[0].value, big) && string(received[1].value) == "after", "large value changed")
}

func saramaUnknownTopic(ctx context.Context, e *env) error {
	missing := e.topic("missing")
	cfg := saramaConfig()
	cfg.Producer.Retry.Max = 2
	producer, err := sarama.NewSyncProducer([]string{e.bootstrap}, cfg)
	if err != nil {
		return err
	}
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: missing, Value: sarama.StringEncoder("x")})
	producer.Close()
	if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("produce to an unknown topic: want ErrUnknownTopicOrPartition, got %v", err)
	}
	adm, err := saramaAdmin(e)
	if err != nil {
		return err
	}
	defer adm.Close()
	topics, err := adm.ListTopics()
	if err != nil {
		return err
	}
	_, exists := topics[missing]
	return checkf(!exists, "the unknown topic was created")
}

func saramaRecordTooLarge(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 1, nil); err != nil {
		return err
	}
	tooBig := make([]byte, 1536*1024)
	rand.New(rand.NewSource(7)).Read(tooBig)
	cfg := saramaConfig()
	cfg.Producer.MaxMessageBytes = 4 << 20 // the client lets it through; the broker refuses it
	producer, err := sarama.NewSyncProducer([]string{e.bootstrap}, cfg)
	if err != nil {
		return err
	}
	_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: a, Value: sarama.ByteEncoder(tooBig)})
	if !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		producer.Close()
		return fmt.Errorf("want ErrMessageSizeTooLarge, got %v", err)
	}
	_, offset, err := producer.SendMessage(&sarama.ProducerMessage{Topic: a, Value: sarama.StringEncoder("fits")})
	producer.Close()
	if err != nil {
		return err
	}
	return checkf(offset == 0, "the refused record was appended: next offset %d", offset)
}

func saramaOffsetOutOfRange(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 1, nil); err != nil {
		return err
	}
	if err := saramaProduce(e, saramaConfig(), a, messages(5, 2)); err != nil {
		return err
	}
	consumer, err := sarama.NewConsumer([]string{e.bootstrap}, saramaConfig())
	if err != nil {
		return err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(a, 0, 1000)
	if err == nil {
		pc.AsyncClose()
	}
	if !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		return fmt.Errorf("want ErrOffsetOutOfRange, got %v", err)
	}
	return nil
}

type groupHandler struct {
	out chan<- got
}

func (groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		g := got{partition: m.Partition, offset: m.Offset, key: m.Key, value: m.Value, timestamp: m.Timestamp}
		for _, h := range m.Headers {
			g.headers = append(g.headers, header{string(h.Key), h.Value})
		}
		h.out <- g
		s.MarkMessage(m, "")
	}
	return nil
}

func saramaGroup(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 2, nil); err != nil {
		return err
	}
	msgs := messages(40, 4)
	if err := saramaProduce(e, saramaConfig(), a, msgs); err != nil {
		return err
	}
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Metadata.Retry.Max = 2
	group, err := sarama.NewConsumerGroup([]string{e.bootstrap}, "go-sarama-group-"+e.suffix, cfg)
	if err != nil {
		return err
	}
	defer group.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := make(chan got, len(msgs)+16)
	errs := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{a}, groupHandler{out}); err != nil {
				errs <- err
				return
			}
		}
	}()
	var received []got
	for len(received) < len(msgs) {
		select {
		case g := <-out:
			received = append(received, g)
		case err := <-errs:
			return err
		case err := <-group.Errors():
			return err
		case <-ctx.Done():
			return fmt.Errorf("expected %d records, got %d within 30 s", len(msgs), len(received))
		}
	}
	return checkRoundTrip(msgs, received, 2)
}

func saramaTransactions(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := saramaCreate(e, a, 1, nil); err != nil {
		return err
	}
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = "go-sarama-txn-" + e.suffix
	cfg.Producer.Transaction.Retry.Max = 5
	cfg.Metadata.Retry.Max = 2
	producer, err := sarama.NewSyncProducer([]string{e.bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer producer.Close()
	msgs := messages(10, 2)
	for i := 0; i < 2; i++ {
		if err := producer.BeginTxn(); err != nil {
			return err
		}
		for _, m := range msgs[i*5 : i*5+5] {
			if _, _, err := producer.SendMessage(saramaMessage(a, m)); err != nil {
				return err
			}
		}
		end := producer.AbortTxn
		if i == 1 {
			end = producer.CommitTxn
		}
		if err := end(); err != nil {
			return err
		}
	}
	cfgc := saramaConfig()
	cfgc.Consumer.IsolationLevel = sarama.ReadCommitted
	consumer, err := sarama.NewConsumer([]string{e.bootstrap}, cfgc)
	if err != nil {
		return err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(a, 0, sarama.OffsetOldest)
	if err != nil {
		return err
	}
	defer pc.AsyncClose()
	deadline := time.After(30 * time.Second)
	for n := 0; n < 5; n++ {
		select {
		case m := <-pc.Messages():
			if indexOf(m.Value) < 5 {
				return fmt.Errorf("read_committed returned aborted record %d", indexOf(m.Value))
			}
		case <-deadline:
			return fmt.Errorf("got %d committed records within 30 s", n)
		}
	}
	return nil
}
