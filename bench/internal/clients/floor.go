package clients

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/chorusrt/chorus/bench/internal/corpus"
)

// floor is the physical limit: net/http plus a bufio line loop. The bare
// floor only frames events (it reports one "delta" per data line); the
// extracting floor also finds the delta's text with bytes.Index of the
// format's key and unescapes it, without allocating.
type floor struct {
	f       corpus.Format
	o       Options
	extract bool
	key     []byte
	url     string
}

func newFloor(f corpus.Format, o Options, extract bool) *floor {
	fl := &floor{f: f, o: o, extract: extract}
	switch f {
	case corpus.OpenAI:
		fl.key = []byte(`"content":`)
		fl.url = o.BaseURL + "/v1/chat/completions"
	case corpus.Anthropic:
		fl.key = []byte(`"text":`)
		fl.url = o.BaseURL + "/v1/messages"
	case corpus.Gemini:
		fl.key = []byte(`"text":`)
	}
	return fl
}

func (fl *floor) Close() { fl.o.HTTP.CloseIdleConnections() }

func (fl *floor) request(ctx context.Context, model string, stream bool) (*http.Request, error) {
	var body, url string
	switch fl.f {
	case corpus.Anthropic:
		body = fmt.Sprintf(`{"model":%q,"max_tokens":%d,"messages":[{"role":"user","content":%q}],"stream":%t}`, model, fl.o.MaxTokens, fl.o.Prompt, stream)
		url = fl.url
	case corpus.Gemini:
		body = fmt.Sprintf(`{"contents":[{"role":"user","parts":[{"text":%q}]}],"generationConfig":{"maxOutputTokens":%d}}`, fl.o.Prompt, fl.o.MaxTokens)
		url = fl.o.BaseURL + "/v1beta/models/" + model + ":generateContent"
		if stream {
			url = fl.o.BaseURL + "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
		}
	default:
		body = fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":%t}`, model, fl.o.Prompt, fl.o.MaxTokens, stream)
		url = fl.url
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	switch fl.f {
	case corpus.Anthropic:
		req.Header.Set("X-Api-Key", fl.o.key())
		req.Header.Set("Anthropic-Version", "2023-06-01")
	case corpus.Gemini:
		req.Header.Set("X-Goog-Api-Key", fl.o.key())
	default:
		req.Header.Set("Authorization", "Bearer "+fl.o.key())
	}
	return req, nil
}

func (fl *floor) do(ctx context.Context, model string, stream bool) (*http.Response, error) {
	req, err := fl.request(ctx, model, stream)
	if err != nil {
		return nil, err
	}
	resp, err := fl.o.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, fmt.Errorf("floor: status %d", resp.StatusCode)
	}
	return resp, nil
}

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

var errNoEnd = errors.New("floor: stream ended without its completion signal")

// Stream frames the SSE body line by line.
func (fl *floor) Stream(ctx context.Context, model string, delta func(string)) error {
	resp, err := fl.do(ctx, model, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	br := readers.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() { br.Reset(nil); readers.Put(br) }()
	return fl.loop(br, delta)
}

// Loop runs the floor's framing loop over r (for decoding from memory).
func (fl *floor) loop(br *bufio.Reader, delta func(string)) error {
	var scratch []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				if fl.f == corpus.Gemini {
					return nil // Gemini ends with the body
				}
				return errNoEnd
			}
			return err
		}
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue // event:, comments and the blank line that ends an event
		}
		data := line[5:]
		if fl.f == corpus.OpenAI && bytes.HasPrefix(data, []byte(" [DONE]")) {
			return nil
		}
		if fl.f == corpus.Anthropic && bytes.Contains(data, []byte(`"message_stop"`)) {
			return nil
		}
		if !fl.extract {
			delta("")
			continue
		}
		text, ok := extract(data, fl.key, &scratch)
		if ok && len(text) > 0 {
			delta(unsafe.String(&text[0], len(text)))
		}
	}
}

// extract finds key in data, then the JSON string after it, and returns
// its unescaped bytes (in scratch when it had escapes).
func extract(data, key []byte, scratch *[]byte) ([]byte, bool) {
	i := bytes.Index(data, key)
	if i < 0 {
		return nil, false
	}
	rest := data[i+len(key):]
	for len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] != '"' {
		return nil, false
	}
	rest = rest[1:]
	escaped := false
	end := -1
	for j := 0; j < len(rest); j++ {
		if c := rest[j]; c == '\\' {
			escaped = true
			j++
		} else if c == '"' {
			end = j
			break
		}
	}
	if end < 0 {
		return nil, false
	}
	if !escaped {
		return rest[:end], true
	}
	return unescape(rest[:end], (*scratch)[:0], scratch), true
}

func unescape(s, out []byte, keep *[]byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			out = append(out, c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			if i+4 < len(s) {
				var r rune
				for _, h := range s[i+1 : i+5] {
					r <<= 4
					switch {
					case h >= '0' && h <= '9':
						r |= rune(h - '0')
					case h >= 'a' && h <= 'f':
						r |= rune(h - 'a' + 10)
					case h >= 'A' && h <= 'F':
						r |= rune(h - 'A' + 10)
					}
				}
				out = utf8.AppendRune(out, r)
				i += 4
			}
		default:
			out = append(out, s[i])
		}
	}
	*keep = out
	return out
}

// Chat reads the whole answer and extracts its text.
func (fl *floor) Chat(ctx context.Context, model string) (string, error) {
	resp, err := fl.do(ctx, model, false)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return "", err
	}
	if !fl.extract {
		return "", nil
	}
	var scratch []byte
	text, ok := extract(buf.Bytes(), fl.key, &scratch)
	if !ok {
		return "", errors.New("floor: no text in the answer")
	}
	return string(text), nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}
