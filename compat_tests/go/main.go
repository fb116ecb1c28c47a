// Command compat runs named compatibility scenarios with one Go Kafka client (franz-go or
// Sarama) against a broker and prints one JSON line per scenario on stdout:
// {"client", "client_version", "scenario", "status", "error", "ms"}.
//
//	go build -o compat . && ./compat -client franz -bootstrap 127.0.0.1:9092 [SCENARIO ...]
//	./compat -client sarama -list
//
// Every scenario creates topics of its own and bounds each wait; a scenario still running after
// -scenario-timeout is reported as failed and the next one starts. The broker is expected to run
// with auto.create.topics.enable=false. The exit status is 0 whenever every scenario ran.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"
)

type scenario struct {
	name string
	run  func(ctx context.Context, env *env) error
}

type env struct {
	bootstrap string
	scenario  string
	suffix    string
}

// topic is a topic name no other scenario or run uses.
func (e *env) topic(tag string) string {
	return fmt.Sprintf("go-%s-%s-%s", e.scenario, tag, e.suffix)
}

type result struct {
	Client        string  `json:"client"`
	ClientVersion string  `json:"client_version"`
	Scenario      string  `json:"scenario"`
	Status        string  `json:"status"`
	Error         *string `json:"error"`
	Ms            int64   `json:"ms"`
}

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			return dep.Version
		}
	}
	return "unknown"
}

func main() {
	client := flag.String("client", "", "franz or sarama")
	bootstrap := flag.String("bootstrap", "", "HOST:PORT of the broker")
	list := flag.Bool("list", false, "print the scenario names and exit")
	timeout := flag.Duration("scenario-timeout", 90*time.Second, "give up on one scenario after this long")
	flag.Parse()

	var scenarios, driven []scenario
	var version string
	switch *client {
	case "franz":
		scenarios, version = franzScenarios(), moduleVersion("github.com/twmb/franz-go")
		driven = franzDriven()
	case "sarama":
		scenarios, version = saramaScenarios(), moduleVersion("github.com/IBM/sarama")
	default:
		fmt.Fprintln(os.Stderr, "usage: compat -client franz|sarama (-bootstrap HOST:PORT [SCENARIO ...] | -list)")
		os.Exit(2)
	}
	if *list {
		for _, s := range scenarios {
			fmt.Println(s.name)
		}
		return
	}
	if *bootstrap == "" {
		fmt.Fprintln(os.Stderr, "-bootstrap is required")
		os.Exit(2)
	}
	selected := scenarios
	if flag.NArg() > 0 {
		byName := map[string]scenario{}
		for _, s := range append(append([]scenario{}, scenarios...), driven...) {
			byName[s.name] = s
		}
		selected = nil
		for _, name := range flag.Args() {
			s, ok := byName[name]
			if !ok {
				fmt.Fprintln(os.Stderr, "unknown scenario", name)
				os.Exit(2)
			}
			selected = append(selected, s)
		}
	}
	out := json.NewEncoder(os.Stdout)
	for _, s := range selected {
		start := time.Now()
		err := runOne(s, *bootstrap, *timeout)
		r := result{Client: *client, ClientVersion: version, Scenario: s.name, Status: "pass", Ms: time.Since(start).Milliseconds()}
		if err != nil {
			msg := err.Error()
			r.Status, r.Error = "fail", &msg
		}
		_ = out.Encode(r)
	}
}

// runOne runs a scenario with a deadline; a scenario that ignores its context is abandoned.
func runOne(s scenario, bootstrap string, timeout time.Duration) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v", p)
			}
		}()
		e := &env{bootstrap: bootstrap, scenario: s.name, suffix: fmt.Sprintf("%08x", time.Now().UnixNano()&0xffffffff)}
		done <- s.run(ctx, e)
	}()
	select {
	case err = <-done:
		return err
	case <-time.After(timeout + 5*time.Second):
		return fmt.Errorf("scenario timed out after %s", timeout)
	}
}
