package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franzDriven are scenarios a test drives through stdin while it kills and restarts brokers:
// run only when named (never by default, nor listed), with their settings in the environment.
func franzDriven() []scenario {
	return []scenario{{"failover-produce", franzFailoverProduce}}
}

// franzFailoverProduce produces FAILOVER_COUNT values (franz-NNNNNN, record i to partition
// i % FAILOVER_PARTITIONS) to FAILOVER_TOPIC, idempotent with acks=all (franz-go's defaults),
// while the driver kills a partition leader and starts it again: a third acknowledged; half of
// the next third produced and "in flight" handed over (the driver kills the leader); the rest of
// it acknowledged and "acked with a broker down" handed over (the driver restarts it); the last
// third acknowledged. Then every value is read back: each once, each partition in send order.
func franzFailoverProduce(ctx context.Context, e *env) error {
	topic := os.Getenv("FAILOVER_TOPIC")
	count, err := strconv.Atoi(os.Getenv("FAILOVER_COUNT"))
	if err != nil {
		return fmt.Errorf("FAILOVER_COUNT: %w", err)
	}
	partitions, err := strconv.Atoi(os.Getenv("FAILOVER_PARTITIONS"))
	if err != nil {
		return fmt.Errorf("FAILOVER_PARTITIONS: %w", err)
	}
	// Every broker the driver names (it kills one of them), not one seed of them all.
	seeds := kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...)
	cl, err := franzClient(e, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.RetryTimeout(60*time.Second),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil))) // the driver keeps stderr
	if err != nil {
		return err
	}
	defer cl.Close()
	driver := bufio.NewReader(os.Stdin)
	handOver := func(step string) error {
		fmt.Println("failover: " + step)
		if _, err := driver.ReadString('\n'); err != nil {
			return fmt.Errorf("the driver closed stdin at %s: %w", step, err)
		}
		return nil
	}
	results := make(chan error, count)
	inFlight := 0
	acknowledged := func() error {
		for ; inFlight > 0; inFlight-- {
			if err := <-results; err != nil {
				return err
			}
		}
		return nil
	}
	third := count / 3
	for i := 0; i < count; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("franz-%06d", i))}
		inFlight++
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
		switch i {
		case third - 1, 2*third - 1, count - 1:
			if err := acknowledged(); err != nil {
				return err
			}
			if i == 2*third-1 {
				if err := handOver("acked with a broker down"); err != nil {
					return err
				}
			}
		case third + third/2 - 1:
			if err := handOver("in flight"); err != nil {
				return err
			}
		}
	}
	read, err := franzConsume(ctx, e, fromStart(topic, int32(partitions)), count, seeds)
	if err != nil {
		return err
	}
	seen := map[int]bool{}
	last := map[int32]int{}
	for _, g := range read {
		index, err := strconv.Atoi(string(g.value[len("franz-"):]))
		if err != nil {
			return fmt.Errorf("value %q: %w", g.value, err)
		}
		if seen[index] {
			return fmt.Errorf("value %d read twice", index)
		}
		seen[index] = true
		if previous, ok := last[g.partition]; ok && previous > index {
			return fmt.Errorf("partition %d out of send order: %d after %d", g.partition, index, previous)
		}
		last[g.partition] = index
	}
	if len(seen) != count {
		return fmt.Errorf("read %d distinct values of %d acknowledged", len(seen), count)
	}
	return nil
}
