package llm

import (
	"errors"
	"strings"
	"testing"
)

type validator interface{ Validate() error }

func TestOpsValidate(t *testing.T) {
	big := make([]byte, MaxTranscriptionBytes+1)
	okAudio := []byte("RIFF....WAVE")
	cases := []struct {
		name  string
		req   validator
		field string // "" means valid
	}{
		{"embed ok", &EmbedRequest{Model: "m", Inputs: []string{"a", "b"}, Dimensions: 8}, ""},
		{"embed nil", (*EmbedRequest)(nil), "request"},
		{"embed model", &EmbedRequest{Inputs: []string{"a"}}, "model"},
		{"embed inputs", &EmbedRequest{Model: "m"}, "inputs"},
		{"embed empty input", &EmbedRequest{Model: "m", Inputs: []string{"a", ""}}, "inputs[1]"},
		{"embed dimensions", &EmbedRequest{Model: "m", Inputs: []string{"a"}, Dimensions: -1}, "dimensions"},
		{"embed reserved header", &EmbedRequest{Model: "m", Inputs: []string{"a"}, Headers: map[string]string{"authorization": "Bearer x"}}, "headers"},
		{"embed malformed header", &EmbedRequest{Model: "m", Inputs: []string{"a"}, Headers: map[string]string{"X-A": "b\r\nc"}}, "headers"},

		{"speech ok", &SpeechRequest{Model: "m", Input: "hi", Voice: "alloy", Format: "mp3", Speed: 1.5}, ""},
		{"speech nil", (*SpeechRequest)(nil), "request"},
		{"speech model", &SpeechRequest{Input: "hi"}, "model"},
		{"speech input", &SpeechRequest{Model: "m", Input: "  "}, "input"},
		{"speech speed", &SpeechRequest{Model: "m", Input: "hi", Speed: 5}, "speed"},
		{"speech format", &SpeechRequest{Model: "m", Input: "hi", Format: "audio/mpeg"}, "format"},
		{"speech header", &SpeechRequest{Model: "m", Input: "hi", Headers: map[string]string{"X-Goog-Api-Key": "k"}}, "headers"},

		{"stt ok", &TranscriptionRequest{Model: "m", Audio: okAudio, Filename: "a.wav", Format: TranscriptionVerboseJSON, Temperature: Ptr(0.2)}, ""},
		{"stt nil", (*TranscriptionRequest)(nil), "request"},
		{"stt model", &TranscriptionRequest{Audio: okAudio}, "model"},
		{"stt audio", &TranscriptionRequest{Model: "m"}, "audio"},
		{"stt cap", &TranscriptionRequest{Model: "m", Audio: big}, "audio"},
		{"stt format", &TranscriptionRequest{Model: "m", Audio: okAudio, Format: "srt-ish"}, "format"},
		{"stt temperature", &TranscriptionRequest{Model: "m", Audio: okAudio, Temperature: Ptr(1.5)}, "temperature"},
		{"stt filename", &TranscriptionRequest{Model: "m", Audio: okAudio, Filename: "a\".wav"}, "filename"},
		{"stt header", &TranscriptionRequest{Model: "m", Audio: okAudio, Headers: map[string]string{"Content-Type": "x"}}, "headers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("got %v, want a ConfigError on %q", err, tc.field)
			}
		})
	}
}

func TestTranscriptionCapIsAVariable(t *testing.T) {
	old := MaxTranscriptionBytes
	t.Cleanup(func() { MaxTranscriptionBytes = old })
	MaxTranscriptionBytes = 4
	r := &TranscriptionRequest{Model: "m", Audio: []byte("12345")}
	var ce *ConfigError
	if err := r.Validate(); !errors.As(err, &ce) || ce.Field != "audio" || !strings.Contains(ce.Msg, "4-byte") {
		t.Fatalf("got %v", err)
	}
	r.Audio = r.Audio[:4]
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestHeaderErrorsNeverShowValues(t *testing.T) {
	secret := "sk-SECRET-value-123"
	for _, h := range []map[string]string{{"Authorization": "Bearer " + secret}, {"X-Bad": secret + "\r\n"}} {
		err := (&EmbedRequest{Model: "m", Inputs: []string{"a"}, Headers: h}).Validate()
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Fatalf("got %v", err)
		}
	}
}
