package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/chorusrt/chorus/bench/internal/soak"
)

func main() {
	if soak.MaybeServe() {
		return
	}
	dur := flag.Duration("duration", 60*time.Second, "how long to keep the load on")
	streams := flag.Int("streams", 2000, "streams kept in flight")
	rate := flag.Float64("fault-rate", 0.05, "probability that a request meets an injected fault")
	appendTo := flag.String("append", "", "append the Soak section to this markdown file")
	flag.Parse()
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	rep, err := soak.Run(context.Background(), soak.Config{Duration: *dur, Streams: *streams, FaultRate: *rate}, self)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		if rep == nil {
			os.Exit(1)
		}
		rep.Err = err.Error()
	}
	md := rep.Markdown()
	fmt.Print(md)
	if *appendTo != "" {
		f, err := os.OpenFile(*appendTo, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
		_, werr := f.WriteString(md)
		if cerr := f.Close(); werr != nil || cerr != nil {
			fmt.Fprintln(os.Stderr, "soak: writing", *appendTo, werr, cerr)
			os.Exit(1)
		}
	}
	if !rep.Returned || rep.Err != "" {
		os.Exit(1)
	}
}
