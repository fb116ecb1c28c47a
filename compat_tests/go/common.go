package main

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"time"
)

var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// msg is one message of the set every client sends: keyed (every fourth unkeyed), with
// headers (one name repeated) and an explicit CreateTime an hour in the past.
type msg struct {
	index     int
	key       []byte
	value     []byte
	timestamp time.Time
}

type header struct {
	key   string
	value []byte
}

func (m msg) headers() []header {
	return []header{
		{"index", []byte(strconv.Itoa(m.index))},
		{"trace", []byte("first")},
		{"trace", []byte(fmt.Sprintf("second-%d", m.index))},
	}
}

func messages(count, keys int) []msg {
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	out := make([]msg, count)
	for i := range out {
		var key []byte
		if i%4 != 3 {
			key = []byte(fmt.Sprintf("user-%d", i%keys))
		}
		out[i] = msg{
			index:     i,
			key:       key,
			value:     []byte(fmt.Sprintf("%06d|kafkalike compatibility payload kafkalike compatibility payload", i)),
			timestamp: base.Add(time.Duration(10*i) * time.Millisecond),
		}
	}
	return out
}

// got is a consumed record, whichever client read it.
type got struct {
	partition int32
	offset    int64
	key       []byte
	value     []byte
	headers   []header
	timestamp time.Time
}

func indexOf(value []byte) int {
	if len(value) < 6 {
		return -1
	}
	i, err := strconv.Atoi(string(value[:6]))
	if err != nil {
		return -1
	}
	return i
}

// checkRoundTrip: everything sent came back once and intact, each key on one partition, each
// partition's offsets contiguous from 0 and in send order.
func checkRoundTrip(sent []msg, received []got, partitions int32) error {
	byIndex := map[int]got{}
	for _, r := range received {
		i := indexOf(r.value)
		if _, dup := byIndex[i]; dup {
			return fmt.Errorf("message %d consumed twice", i)
		}
		byIndex[i] = r
	}
	if len(byIndex) != len(sent) {
		return fmt.Errorf("expected %d distinct messages, got %d", len(sent), len(byIndex))
	}
	partitionsOfKey := map[string]map[int32]bool{}
	for _, m := range sent {
		r, ok := byIndex[m.index]
		if !ok {
			return fmt.Errorf("message %d missing", m.index)
		}
		if !bytes.Equal(r.key, m.key) || !bytes.Equal(r.value, m.value) {
			return fmt.Errorf("message %d: key/value changed", m.index)
		}
		if !r.timestamp.Equal(m.timestamp) {
			return fmt.Errorf("message %d: timestamp %v, sent %v", m.index, r.timestamp, m.timestamp)
		}
		want := m.headers()
		if len(r.headers) != len(want) {
			return fmt.Errorf("message %d: %d headers, sent %d", m.index, len(r.headers), len(want))
		}
		for i := range want {
			if r.headers[i].key != want[i].key || !bytes.Equal(r.headers[i].value, want[i].value) {
				return fmt.Errorf("message %d: header %d changed", m.index, i)
			}
		}
		if r.partition < 0 || r.partition >= partitions {
			return fmt.Errorf("message %d on partition %d", m.index, r.partition)
		}
		if m.key != nil {
			k := string(m.key)
			if partitionsOfKey[k] == nil {
				partitionsOfKey[k] = map[int32]bool{}
			}
			partitionsOfKey[k][r.partition] = true
		}
	}
	for k, ps := range partitionsOfKey {
		if len(ps) != 1 {
			return fmt.Errorf("key %s on %d partitions", k, len(ps))
		}
	}
	perPartition := map[int32][]got{}
	for _, r := range received {
		perPartition[r.partition] = append(perPartition[r.partition], r)
	}
	for p, rs := range perPartition {
		sort.Slice(rs, func(i, j int) bool { return rs[i].offset < rs[j].offset })
		for i, r := range rs {
			if r.offset != int64(i) {
				return fmt.Errorf("partition %d: offsets not contiguous from 0", p)
			}
			if i > 0 && indexOf(rs[i-1].value) >= indexOf(r.value) {
				return fmt.Errorf("partition %d not in send order", p)
			}
		}
	}
	return nil
}

func checkf(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf("check failed: "+format, args...)
}

// eventually retries check until it passes or 30 s have gone by: Apache Kafka shows a new topic
// (or new partitions) in its metadata a moment after the admin request returns.
func eventually(check func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
