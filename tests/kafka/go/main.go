// Command franzcheck drives franz-go (github.com/twmb/franz-go), a Go Kafka client, at its
// default settings against a Kafka listener, for tests/kafka/test_go_client.py: a producer
// (franz-go's defaults: idempotence on, acks=all) sends N records with headers to a
// topic, then a group consumer reads them back. It prints one line per step:
//
//	STEP produce ok acked=N
//	STEP consume ok read=N exact
//
// or "STEP <name> error <text>"; "exact" means every record came back once with its key,
// value and headers (order and duplicate names kept) byte for byte.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func headersOf(i int) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: "h1", Value: []byte("x")},
		{Key: "seq", Value: []byte(strconv.Itoa(i))},
		{Key: "h1", Value: []byte{0, 255, byte(i)}},
	}
}

func sameHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func main() {
	if len(os.Args) != 5 {
		fmt.Println("usage: franzcheck BROKER TOPIC GROUP COUNT")
		os.Exit(2)
	}
	broker, topic, group := os.Args[1], os.Args[2], os.Args[3]
	count, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fmt.Println("STEP args error", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	producer, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		fmt.Println("STEP produce error", err)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	for i := 0; i < count; i++ {
		wg.Add(1)
		record := &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)),
			Value: []byte("value-" + strconv.Itoa(i)), Headers: headersOf(i)}
		producer.Produce(ctx, record, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	producer.Close()
	if len(failures) > 0 {
		fmt.Println("STEP produce error", len(failures), failures[0])
		os.Exit(1)
	}
	fmt.Printf("STEP produce ok acked=%d\n", count)

	consumer, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		fmt.Println("STEP consume error", err)
		os.Exit(1)
	}
	defer consumer.Close()
	seen := make(map[int]bool)
	exact := true
	for len(seen) < count {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			fmt.Printf("STEP consume error timeout read=%d\n", len(seen))
			os.Exit(1)
		}
		for _, fetchErr := range fetches.Errors() {
			fmt.Println("STEP consume error", fetchErr.Topic, fetchErr.Partition, fetchErr.Err)
			os.Exit(1)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Key[1:]))
			if err != nil || seen[i] || string(r.Value) != "value-"+strconv.Itoa(i) ||
				!sameHeaders(r.Headers, headersOf(i)) {
				exact = false
			}
			seen[i] = true
		})
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		fmt.Println("STEP consume error commit", err)
		os.Exit(1)
	}
	verdict := "exact"
	if !exact {
		verdict = "mismatch"
	}
	fmt.Printf("STEP consume ok read=%d %s\n", len(seen), verdict)
}
