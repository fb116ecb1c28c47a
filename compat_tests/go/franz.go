package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func franzScenarios() []scenario {
	s := []scenario{
		{"admin-create-topics", franzCreateTopics},
		{"admin-create-topic-errors", franzCreateTopicErrors},
		{"admin-list-topics", franzListTopics},
		{"admin-describe-cluster", franzDescribeCluster},
		{"admin-create-partitions", franzCreatePartitions},
		{"admin-describe-configs", franzDescribeConfigs},
		{"admin-delete-topics", franzDeleteTopics},
		{"admin-list-offsets", franzListOffsets},
		{"produce-keyed-ordering", franzKeyedOrdering},
		{"produce-acks-0", func(ctx context.Context, e *env) error { return franzAcks(ctx, e, kgo.NoAck()) }},
		{"produce-acks-1", func(ctx context.Context, e *env) error { return franzAcks(ctx, e, kgo.LeaderAck()) }},
	}
	for _, codec := range codecs {
		s = append(s, scenario{"compression-" + codec, func(ctx context.Context, e *env) error { return franzCompression(ctx, e, codec) }})
	}
	return append(s,
		scenario{"consume-from-offset", franzConsumeFromOffset},
		scenario{"consume-from-timestamp", franzConsumeFromTimestamp},
		scenario{"large-message", franzLargeMessage},
		scenario{"error-unknown-topic", franzUnknownTopic},
		scenario{"error-record-too-large", franzRecordTooLarge},
		scenario{"error-offset-out-of-range", franzOffsetOutOfRange},
		scenario{"group", franzGroup},
		scenario{"transactions", franzTransactions},
	)
}

func franzClient(e *env, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(e.bootstrap), kgo.ProducerLinger(5 * time.Millisecond), kgo.RetryTimeout(20 * time.Second)}
	return kgo.NewClient(append(base, opts...)...)
}

func franzAdmin(e *env) (*kadm.Client, *kgo.Client, error) {
	cl, err := franzClient(e)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

func franzCreate(ctx context.Context, e *env, topic string, partitions int32, configs map[string]*string) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = adm.CreateTopic(ctx, partitions, 1, configs, topic)
	return err
}

func franzRecord(topic string, m msg) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: m.key, Value: m.value, Timestamp: m.timestamp}
	for _, h := range m.headers() {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.key, Value: h.value})
	}
	return r
}

func franzProduce(ctx context.Context, cl *kgo.Client, topic string, msgs []msg) error {
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = franzRecord(topic, m)
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// franzConsume reads count records from the given start offsets of the partitions (assigned, no group).
func franzConsume(ctx context.Context, e *env, offsets map[string]map[int32]kgo.Offset, count int, opts ...kgo.Opt) ([]got, error) {
	cl, err := franzClient(e, append([]kgo.Opt{kgo.ConsumePartitions(offsets)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return franzPoll(ctx, cl, count)
}

func franzPoll(ctx context.Context, cl *kgo.Client, count int) ([]got, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []got
	for len(out) < count {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("expected %d records, got %d within 30 s", count, len(out))
		}
		for _, fe := range fetches.Errors() {
			return out, fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			g := got{partition: r.Partition, offset: r.Offset, key: r.Key, value: r.Value, timestamp: r.Timestamp}
			for _, h := range r.Headers {
				g.headers = append(g.headers, header{h.Key, h.Value})
			}
			out = append(out, g)
		})
	}
	return out, nil
}

func fromStart(topic string, partitions int32) map[string]map[int32]kgo.Offset {
	m := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		m[p] = kgo.NewOffset().AtStart()
	}
	return map[string]map[int32]kgo.Offset{topic: m}
}

func franzCreateTopics(ctx context.Context, e *env) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	a, b := e.topic("a"), e.topic("b")
	resp, err := adm.CreateTopics(ctx, 3, 1, nil, a)
	if err != nil {
		return err
	}
	if err := resp.Error(); err != nil {
		return err
	}
	if r := resp[a]; r.NumPartitions != 3 || r.ReplicationFactor != 1 || r.ID == [16]byte{} {
		return fmt.Errorf("create response %+v", r)
	}
	// -1 partitions and replication factor: the broker's defaults.
	rb, err := adm.CreateTopic(ctx, -1, -1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, b)
	if err != nil {
		return err
	}
	if err := checkf(rb.NumPartitions >= 1 && rb.ReplicationFactor == 1, "defaults gave %d partitions, rf %d", rb.NumPartitions, rb.ReplicationFactor); err != nil {
		return err
	}
	return eventually(func() error {
		md, err := adm.Metadata(ctx, a, b)
		if err != nil {
			return err
		}
		return checkf(len(md.Topics[a].Partitions) == 3 && md.Topics[a].Err == nil && md.Topics[b].Err == nil, "metadata after create: %+v", md.Topics)
	})
}

func franzCreateTopicErrors(ctx context.Context, e *env) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	a := e.topic("a")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, a); err != nil {
		return err
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, a); !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("existing topic: want TOPIC_ALREADY_EXISTS, got %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, e.topic("rf")); !errors.Is(err, kerr.InvalidReplicationFactor) {
		return fmt.Errorf("rf 3: want INVALID_REPLICATION_FACTOR, got %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bad/"+e.suffix); !errors.Is(err, kerr.InvalidTopicException) {
		return fmt.Errorf("bad name: want INVALID_TOPIC_EXCEPTION, got %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("bogus")}, e.topic("cfg")); !errors.Is(err, kerr.InvalidConfig) {
		return fmt.Errorf("bad config: want INVALID_CONFIG, got %v", err)
	}
	v := e.topic("validate")
	resp, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, v)
	if err != nil || resp.Error() != nil {
		return fmt.Errorf("validate only: %v %v", err, resp.Error())
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	return checkf(!topics.Has(v), "validate-only created the topic")
}

func franzListTopics(ctx context.Context, e *env) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	a, b := e.topic("a"), e.topic("b")
	if _, err := adm.CreateTopics(ctx, 2, 1, nil, a, b); err != nil {
		return err
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	if err := checkf(topics.Has(a) && topics.Has(b), "list lacks the new topics"); err != nil {
		return err
	}
	for name := range topics {
		if strings.HasPrefix(name, "__") {
			return fmt.Errorf("ListTopics shows internal topic %s", name)
		}
	}
	var d kadm.TopicDetail
	if err := eventually(func() error {
		described, err := adm.ListTopics(ctx, a)
		if err != nil {
			return err
		}
		d = described[a]
		return checkf(d.Err == nil && len(d.Partitions) == 2 && d.ID != [16]byte{}, "describe %+v", d)
	}); err != nil {
		return err
	}
	for _, p := range d.Partitions {
		if p.Leader < 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.Err != nil {
			return fmt.Errorf("partition %+v", p)
		}
	}
	return nil
}

func franzDescribeCluster(ctx context.Context, e *env) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if err := checkf(len(md.Brokers) == 1 && md.Cluster != "" && md.Controller == md.Brokers[0].NodeID, "metadata %+v", md); err != nil {
		return err
	}
	b := md.Brokers[0]
	return checkf(fmt.Sprintf("%s:%d", b.Host, b.Port) == e.bootstrap, "broker address %s:%d", b.Host, b.Port)
}

func franzCreatePartitions(ctx context.Context, e *env) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	a := e.topic("a")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, a); err != nil {
		return err
	}
	resp, err := adm.UpdatePartitions(ctx, 4, a)
	if err != nil || resp.Error() != nil {
		return fmt.Errorf("grow to 4: %v %v", err, resp.Error())
	}
	resp, err = adm.UpdatePartitions(ctx, 2, a)
	if err != nil || !errors.Is(resp.Error(), kerr.InvalidPartitions) {
		return fmt.Errorf("shrink: want INVALID_PARTITIONS, got %v %v", err, resp.Error())
	}
	return eventually(func() error {
		md, err := adm.Metadata(ctx, a)
		if err != nil {
			return err
		}
		return checkf(len(md.Topics[a].Partitions) == 4, "partition count %d", len(md.Topics[a].Partitions))
	})
}

func franzDescribeConfigs(ctx context.Context, e *env) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	a := e.topic("a")
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("123456")}, a); err != nil {
		return err
	}
	values := map[string]kadm.Config{}
	// Apache Kafka applies a new topic's configs a moment after CreateTopics returns.
	if err := eventually(func() error {
		rcs, err := adm.DescribeTopicConfigs(ctx, a)
		if err != nil {
			return err
		}
		rc, err := rcs.On(a, nil)
		if err != nil {
			return err
		}
		for _, c := range rc.Configs {
			values[c.Key] = c
		}
		c := values["retention.ms"]
		return checkf(c.MaybeValue() == "123456" && c.Source.String() == "DYNAMIC_TOPIC_CONFIG", "retention.ms %q from %s", c.MaybeValue(), c.Source)
	}); err != nil {
		return err
	}
	if c := values["cleanup.policy"]; c.MaybeValue() != "delete" {
		return fmt.Errorf("cleanup.policy %q", c.MaybeValue())
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) == 0 {
		return fmt.Errorf("broker metadata: %v", err)
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID)
	if err != nil {
		return err
	}
	if err := checkf(len(brokers) == 1 && len(brokers[0].Configs) > 0 && brokers[0].Err == nil, "broker configs %+v", brokers); err != nil {
		return err
	}
	// No name: the cluster-wide dynamic defaults. A fresh cluster has none, except that with
	// eligible leader replicas (on by default since Kafka 4.1, KIP-966) the controller sets
	// min.insync.replicas there.
	defaults, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return err
	}
	others := 0
	if len(defaults) == 1 {
		for _, c := range defaults[0].Configs {
			if c.Key != "min.insync.replicas" {
				others++
			}
		}
	}
	return checkf(len(defaults) == 1 && others == 0 && defaults[0].Err == nil, "cluster default configs %+v", defaults)
}

func franzDeleteTopics(ctx context.Context, e *env) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	a := e.topic("a")
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, a); err != nil {
		return err
	}
	resp, err := adm.DeleteTopics(ctx, a)
	if err != nil || resp.Error() != nil {
		return fmt.Errorf("delete: %v %v", err, resp.Error())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		if !topics.Has(a) {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("topic still listed after delete")
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err = adm.DeleteTopics(ctx, a)
	if err != nil || !errors.Is(resp.Error(), kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("delete again: want UNKNOWN_TOPIC_OR_PARTITION, got %v %v", err, resp.Error())
	}
	return nil
}

func franzListOffsets(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 1, nil); err != nil {
		return err
	}
	msgs := messages(10, 3)
	cl, err := franzClient(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := franzProduce(ctx, cl, a, msgs); err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	start, err := adm.ListStartOffsets(ctx, a)
	if err != nil {
		return err
	}
	end, err := adm.ListEndOffsets(ctx, a)
	if err != nil {
		return err
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, msgs[4].timestamp.UnixMilli()-5, a)
	if err != nil {
		return err
	}
	s, _ := start.Lookup(a, 0)
	n, _ := end.Lookup(a, 0)
	t, _ := after.Lookup(a, 0)
	return checkf(s.Offset == 0 && n.Offset == 10 && t.Offset == 4 && s.Err == nil && n.Err == nil && t.Err == nil,
		"start %+v end %+v after %+v", s, n, t)
}

func franzKeyedOrdering(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 3, nil); err != nil {
		return err
	}
	msgs := messages(2000, 20)
	// Idempotent by default; several batches in flight per partition.
	cl, err := franzClient(e, kgo.ProducerBatchMaxBytes(4096))
	if err != nil {
		return err
	}
	err = franzProduce(ctx, cl, a, msgs)
	cl.Close()
	if err != nil {
		return err
	}
	received, err := franzConsume(ctx, e, fromStart(a, 3), len(msgs))
	if err != nil {
		return err
	}
	return checkRoundTrip(msgs, received, 3)
}

func franzAcks(ctx context.Context, e *env, acks kgo.Acks) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 2, nil); err != nil {
		return err
	}
	if err := franzWaitLeaders(ctx, e, a); err != nil {
		return err
	}
	msgs := messages(100, 5)
	cl, err := franzClient(e, kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite())
	if err != nil {
		return err
	}
	err = franzProduce(ctx, cl, a, msgs)
	cl.Close()
	if err != nil {
		return err
	}
	received, err := franzConsume(ctx, e, fromStart(a, 2), len(msgs))
	if err != nil {
		return err
	}
	return checkRoundTrip(msgs, received, 2)
}

func franzCompression(ctx context.Context, e *env, codec string) error {
	c := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}[codec]
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 3, nil); err != nil {
		return err
	}
	msgs := messages(300, 5)
	cl, err := franzClient(e, kgo.ProducerBatchCompression(c), kgo.ProducerLinger(20*time.Millisecond))
	if err != nil {
		return err
	}
	err = franzProduce(ctx, cl, a, msgs)
	cl.Close()
	if err != nil {
		return err
	}
	received, err := franzConsume(ctx, e, fromStart(a, 3), len(msgs))
	if err != nil {
		return err
	}
	return checkRoundTrip(msgs, received, 3)
}

func franzConsumeFromOffset(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 1, nil); err != nil {
		return err
	}
	msgs := messages(30, 3)
	cl, err := franzClient(e, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err != nil {
		return err
	}
	err = franzProduce(ctx, cl, a, msgs)
	cl.Close()
	if err != nil {
		return err
	}
	offsets := map[string]map[int32]kgo.Offset{a: {0: kgo.NewOffset().At(17)}}
	received, err := franzConsume(ctx, e, offsets, 13)
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

func franzConsumeFromTimestamp(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 1, nil); err != nil {
		return err
	}
	msgs := messages(20, 3)
	cl, err := franzClient(e, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	if err != nil {
		return err
	}
	err = franzProduce(ctx, cl, a, msgs)
	cl.Close()
	if err != nil {
		return err
	}
	offsets := map[string]map[int32]kgo.Offset{a: {0: kgo.NewOffset().AfterMilli(msgs[11].timestamp.UnixMilli() - 5)}}
	received, err := franzConsume(ctx, e, offsets, 9)
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

func franzLargeMessage(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 1, nil); err != nil {
		return err
	}
	big := make([]byte, 900*1024)
	rand.New(rand.NewSource(42)).Read(big)
	cl, err := franzClient(e)
	if err != nil {
		return err
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: a, Key: []byte("big"), Value: big}, &kgo.Record{Topic: a, Value: []byte("after")}).FirstErr()
	cl.Close()
	if err != nil {
		return err
	}
	received, err := franzConsume(ctx, e, fromStart(a, 1), 2)
	if err != nil {
		return err
	}
	return checkf(bytes.Equal(received[0].value, big) && string(received[1].value) == "after", "large value changed")
}

func franzUnknownTopic(ctx context.Context, e *env) error {
	missing := e.topic("missing")
	cl, err := franzClient(e, kgo.UnknownTopicRetries(2))
	if err != nil {
		return err
	}
	defer cl.Close()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: missing, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("produce to an unknown topic: want UNKNOWN_TOPIC_OR_PARTITION, got %v", err)
	}
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, missing)
	if err != nil {
		return err
	}
	if !errors.Is(md.Topics[missing].Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("metadata of an unknown topic: %v", md.Topics[missing].Err)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	return checkf(!topics.Has(missing), "the unknown topic was created")
}

func franzRecordTooLarge(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 1, nil); err != nil {
		return err
	}
	tooBig := make([]byte, 1536*1024)
	rand.New(rand.NewSource(7)).Read(tooBig)
	// The client lets it through; the broker's message.max.bytes (about 1 MB) refuses it.
	cl, err := franzClient(e, kgo.ProducerBatchMaxBytes(4<<20), kgo.BrokerMaxWriteBytes(8<<20))
	if err != nil {
		return err
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: a, Value: tooBig}).FirstErr()
	cl.Close()
	if !errors.Is(err, kerr.MessageTooLarge) {
		return fmt.Errorf("want MESSAGE_TOO_LARGE, got %v", err)
	}
	cl, err = franzClient(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: a, Value: []byte("fits")}).First()
	if err != nil {
		return err
	}
	return checkf(r.Offset == 0, "the refused record was appended: next offset %d", r.Offset)
}

func franzOffsetOutOfRange(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 1, nil); err != nil {
		return err
	}
	cl, err := franzClient(e)
	if err != nil {
		return err
	}
	err = franzProduce(ctx, cl, a, messages(5, 2))
	cl.Close()
	if err != nil {
		return err
	}
	offsets := map[string]map[int32]kgo.Offset{a: {0: kgo.NewOffset().At(1000)}}
	_, err = franzConsume(ctx, e, offsets, 1, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	if !errors.Is(err, kerr.OffsetOutOfRange) {
		return fmt.Errorf("want OFFSET_OUT_OF_RANGE, got %v", err)
	}
	return nil
}

func franzGroup(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 2, nil); err != nil {
		return err
	}
	msgs := messages(40, 4)
	cl, err := franzClient(e)
	if err != nil {
		return err
	}
	err = franzProduce(ctx, cl, a, msgs)
	cl.Close()
	if err != nil {
		return err
	}
	group := "go-franz-group-" + e.suffix
	consumer, err := franzClient(e, kgo.ConsumerGroup(group), kgo.ConsumeTopics(a), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer consumer.Close()
	received, err := franzPoll(ctx, consumer, len(msgs))
	if err != nil {
		return err
	}
	if err := checkRoundTrip(msgs, received, 2); err != nil {
		return err
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		return err
	}
	offsets, err := kadm.NewClient(consumer).FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	return checkf(total == int64(len(msgs)), "committed offsets add up to %d", total)
}

func franzTransactions(ctx context.Context, e *env) error {
	a := e.topic("a")
	if err := franzCreate(ctx, e, a, 1, nil); err != nil {
		return err
	}
	msgs := messages(10, 2)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := franzClient(e, kgo.TransactionalID("go-franz-txn-"+e.suffix))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := franzProduce(ctx, cl, a, msgs[i*5:i*5+5]); err != nil {
			return err
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			return err
		}
	}
	received, err := franzConsume(ctx, e, fromStart(a, 1), 5, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	for _, r := range received {
		if indexOf(r.value) < 5 {
			return fmt.Errorf("read_committed returned aborted record %d", indexOf(r.value))
		}
	}
	return nil
}

// franzWaitLeaders waits until every partition's leader answers ListOffsets: nothing reports an
// acks=0 record lost, and Apache Kafka's leaders take writes a moment after CreateTopics returns.
func franzWaitLeaders(ctx context.Context, e *env, topic string) error {
	adm, cl, err := franzAdmin(e)
	if err != nil {
		return err
	}
	defer cl.Close()
	return eventually(func() error {
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		return listed.Error()
	})
}
