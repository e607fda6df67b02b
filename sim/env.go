package sim

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// The environment variables FromEnv reads.
const (
	EnvLatency         = "CHORUS_SIM_LATENCY"           // a Go duration: "20ms"
	EnvTokensPerSecond = "CHORUS_SIM_TOKENS_PER_SECOND" // a number: "200"
	EnvRPM             = "CHORUS_SIM_RPM"               // an integer
	EnvTPM             = "CHORUS_SIM_TPM"               // an integer
	EnvWindow          = "CHORUS_SIM_WINDOW"            // a Go duration: "1m"
)

// FromEnv returns base with every setting found in the environment
// applied. An unparsable value is a *llm.ConfigError naming the variable.
func FromEnv(base Options) (Options, error) { return FromEnvFunc(base, os.Getenv) }

// FromEnvFunc is FromEnv over a custom lookup.
func FromEnvFunc(base Options, getenv func(string) string) (Options, error) {
	o := base
	dur := func(name string, dst *time.Duration) error {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return &llm.ConfigError{Field: name, Msg: fmt.Sprintf("%q is not a non-negative duration like 20ms", v)}
		}
		*dst = d
		return nil
	}
	integer := func(name string, dst *int) error {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return &llm.ConfigError{Field: name, Msg: fmt.Sprintf("%q is not a non-negative integer", v)}
		}
		*dst = n
		return nil
	}
	if err := dur(EnvLatency, &o.Latency); err != nil {
		return base, err
	}
	if err := dur(EnvWindow, &o.Window); err != nil {
		return base, err
	}
	if err := integer(EnvRPM, &o.RPM); err != nil {
		return base, err
	}
	if err := integer(EnvTPM, &o.TPM); err != nil {
		return base, err
	}
	if v := strings.TrimSpace(getenv(EnvTokensPerSecond)); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return base, &llm.ConfigError{Field: EnvTokensPerSecond, Msg: fmt.Sprintf("%q is not a non-negative number", v)}
		}
		o.TokensPerSecond = f
	}
	return o, nil
}
