package mcptools

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chorusrt/chorus/llm"
)

// Result is one tool call's result.
type Result struct {
	// Text is the result's text content, its pieces joined by newlines:
	// text blocks, embedded text resources, and a line per resource link,
	// audio clip or binary resource ("[resource link: NAME URI]"). When the
	// server sent no text but structured content, Text is that JSON.
	Text string
	// Images are the result's images as inline image parts (llm.ImagePart),
	// and embedded blob resources whose MIME type is an image.
	Images []llm.Part
	// Structured is the result's structuredContent, as the server sent it
	// (nil when it sent none).
	Structured json.RawMessage
	// IsError is the server's isError: the tool ran and failed.
	IsError bool
}

// convert turns an MCP result into a Result.
func convert(server, tool string, r *mcp.CallToolResult) *Result {
	out := &Result{IsError: r.IsError}
	var text []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			text = append(text, c.Text)
		case *mcp.ImageContent:
			out.Images = append(out.Images, llm.ImagePart(c.MIMEType, c.Data))
		case *mcp.AudioContent:
			text = append(text, fmt.Sprintf("[audio %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			text = append(text, fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			rc := c.Resource
			switch {
			case rc == nil:
			case rc.Blob == nil:
				text = append(text, rc.Text)
			case strings.HasPrefix(rc.MIMEType, "image/"):
				out.Images = append(out.Images, llm.ImagePart(rc.MIMEType, rc.Blob))
			default:
				text = append(text, fmt.Sprintf("[resource %s, %s, %d bytes, not shown]", rc.URI, rc.MIMEType, len(rc.Blob)))
			}
		}
	}
	out.Text = strings.Join(text, "\n")
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			out.Structured = b
			if out.Text == "" {
				out.Text = string(b)
			}
		}
	}
	return out
}

// modelText is the text the model sees for a result: Text, or a note when
// the result carries only images (providers need some text).
func (r *Result) modelText() string {
	if r.Text == "" && len(r.Images) > 0 {
		return fmt.Sprintf("(%d image(s) attached)", len(r.Images))
	}
	return r.Text
}
