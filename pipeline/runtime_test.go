package pipeline_test

import (
	"github.com/chorusrt/chorus/pipeline"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/runtime"
)

// The runtime and a plain provider client both drive every stage.
var (
	_ pipeline.Client = (*runtime.Runtime)(nil)
	_ pipeline.Client = (*providers.Client)(nil)
)
