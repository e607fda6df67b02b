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

// floor is the physical limit: net/http plus a line loop over a 4 KiB
// pooled bufio.Reader. The bare floor only frames events (it reports one
// "delta" per data line); the extracting floor also finds the delta's
// text with bytes.Index of the format's key and unescapes it, without
// allocating. TestFloorExtracts checks that each floor gives exactly the
// corpus's deltas, and the report flags any figure where a Chorus client
// beats its floor ("floor not a floor").
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

// floorBuf is the floor's read buffer, pooled between streams. 4 KiB,
// the size of net/http's own connection buffer and of Chorus's SSE
// reader: the corpus's longest line is about 500 bytes, so 512 bytes would
// work, but each refill of a small buffer slides the partial line left
// and costs the bare floor about twice its CPU per delta (measured with
// BenchmarkFloorBareOpenAI at 512, 1024 and 4096), which would let a
// client with a bigger buffer beat the floor. A line longer than the
// buffer is gathered in the stream's scratch slice instead of failing.
// (The floors used to hold 16 KiB per stream.)
const floorBuf = 4096

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, floorBuf) }}

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

// readLine returns the next line, its newline included; a line longer
// than br's buffer is gathered in *long.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	buf := append((*long)[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = br.ReadSlice('\n')
		buf = append(buf, line...)
	}
	*long = buf
	return buf, err
}

var (
	prefixData  = []byte("data:")
	prefixEvent = []byte("event:")
	doneMark    = []byte(" [DONE]")
)

// loop is the floor's framing loop over br (a network body or memory).
// It does the least work that still produces the same events as a full
// client from the same bytes: OpenAI ends at data: [DONE]; Anthropic is
// told by its event: lines (message_stop ends the stream, and only
// content_block_delta data is searched for text); Gemini ends with the
// body.
func (fl *floor) loop(br *bufio.Reader, delta func(string)) error {
	var scratch, long []byte
	deltaData := true // Anthropic: the data line belongs to a content_block_delta
	for {
		line, err := readLine(br, &long)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if fl.f == corpus.Gemini {
					return nil // Gemini ends with the body
				}
				return errNoEnd
			}
			return err
		}
		if fl.f == corpus.Anthropic && bytes.HasPrefix(line, prefixEvent) {
			name := bytes.TrimSpace(line[len(prefixEvent):])
			if string(name) == "message_stop" {
				return nil
			}
			deltaData = string(name) == "content_block_delta"
			continue
		}
		if !bytes.HasPrefix(line, prefixData) {
			continue // comments and the blank line that ends an event
		}
		data := line[len(prefixData):]
		if fl.f == corpus.OpenAI && bytes.HasPrefix(data, doneMark) {
			return nil
		}
		if !fl.extract {
			delta("")
			continue
		}
		if !deltaData {
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
