// Command rein-mock serves a fault-injecting model server (package
// llm/mock) for manual runs of rein against scripted provider behaviour.
//
//	rein-mock -addr 127.0.0.1:8377 -script faults.json
//	OPENAI_BASE_URL=http://127.0.0.1:8377/v1 OPENAI_API_KEY=x rein -model openai:mock
//	ANTHROPIC_BASE_URL=http://127.0.0.1:8377 ANTHROPIC_API_KEY=x rein -model anthropic:mock
//
// Without -script it answers every request with a short text reply.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/reinhq/rein/llm/mock"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8377", "listen address")
	script := flag.String("script", "", "JSON script: {\"replies\":[{\"text\":…}|{\"fault\":\"rate-limit\",\"retryAfter\":\"2s\"}…],\"loop\":true}")
	flag.Parse()
	sc := mock.Script{Replies: []mock.Reply{{Text: "Hello from rein-mock.", Delay: mock.Duration(20e6)}}, Loop: true}
	if *script != "" {
		var err error
		if sc, err = mock.LoadScript(*script); err != nil {
			fmt.Fprintln(os.Stderr, "rein-mock:", err)
			os.Exit(2)
		}
	}
	fmt.Fprintf(os.Stderr, "rein-mock: serving %d replies on http://%s (OpenAI: /v1/chat/completions, Anthropic: /v1/messages)\n", len(sc.Replies), *addr)
	if err := mock.ListenAndServe(*addr, sc); err != nil {
		fmt.Fprintln(os.Stderr, "rein-mock:", err)
		os.Exit(1)
	}
}
