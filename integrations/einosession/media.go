package einosession

import (
	"context"
	"fmt"
	"strings"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
)

// WithMedia returns c with the session's media references (URLs of
// session.MediaScheme) in every request swapped for their bytes from ms.
// The runner hands the tree a user's images as such references, so that
// eino's checkpoint, kept in the journal, holds no image bytes; give the
// agents' Chorus models (chorus.New) this client, with the session's
// Options.Media, so that each model request gets the bytes back.
func WithMedia(c chorus.Client, ms session.MediaStore) chorus.Client { return mediaClient{c, ms} }

type mediaClient struct {
	c  chorus.Client
	ms session.MediaStore
}

func (m mediaClient) Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error) {
	req, err := m.load(ctx, req)
	if err != nil {
		return nil, err
	}
	return m.c.Chat(ctx, req)
}

func (m mediaClient) Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error) {
	req, err := m.load(ctx, req)
	if err != nil {
		return nil, err
	}
	return m.c.Stream(ctx, req)
}

// load returns req with its media references loaded (a copy when it has
// any: the caller's request is not changed).
func (m mediaClient) load(ctx context.Context, req *llm.ChatRequest) (*llm.ChatRequest, error) {
	var out *llm.ChatRequest
	for i, msg := range req.Messages {
		var parts []llm.Part
		for j, p := range msg.Parts {
			if !strings.HasPrefix(p.URL, session.MediaScheme) {
				continue
			}
			if parts == nil {
				parts = append([]llm.Part(nil), msg.Parts...)
			}
			b, err := m.ms.Get(ctx, session.MediaRef{URI: p.URL, MIMEType: p.MIMEType})
			if err != nil {
				return nil, fmt.Errorf("einosession: loading %s: %w", p.URL, err)
			}
			parts[j] = llm.Part{Type: p.Type, MIMEType: p.MIMEType, Data: b}
		}
		if parts == nil {
			continue
		}
		if out == nil {
			cp := *req
			cp.Messages = append([]llm.Message(nil), req.Messages...)
			out = &cp
		}
		out.Messages[i].Parts = parts
	}
	if out == nil {
		return req, nil
	}
	return out, nil
}
