// Command echoserver is the demo's backend pod and client: `echoserver serve NAME`
// answers HTTP :80 and UDP :53 with NAME; `echoserver get ADDR N` makes N requests
// on new connections and prints who answered.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/svcproxy/svcproxy/internal/echoserver"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: echoserver serve NAME | echoserver get ADDR [N]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := echoserver.Serve(ctx, os.Args[2], ":80", ":53"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "get":
		n := 1
		if len(os.Args) > 3 {
			n, _ = strconv.Atoi(os.Args[3])
		}
		failed := 0
		for i := 0; i < n; i++ {
			body, err := echoserver.Get(os.Args[2], 2*time.Second)
			if err != nil {
				failed++
				body = "error: " + err.Error()
			}
			fmt.Println(body)
		}
		if failed > 0 {
			os.Exit(1)
		}
	}
}
