# Chorus: make test is what CI runs (.ci/run). Tests are hermetic: loopback only, no keys.
GO           ?= go
TEST_TIMEOUT ?= 900s
FUZZTIME     ?= 10m
PKGS         ?= ./...

.PHONY: test apidiff jaeger vet race race-cluster conformance bench bench-portkey bench-gateways bench-check gobench soak-partitions partitions fuzz lint e2e proto proto-check mcp-servers sdk-clients sdk-go integrations

test: mcp-servers sdk-clients sdk-go integrations jaeger vet race race-cluster conformance

# The MCP reference servers that mcptools' tests start, pinned exactly by
# mcptools/testdata/npm (package.json and its package-lock.json) and
# installed with npm ci into .cache/npm (gitignored). A changed lock file
# reinstalls; an unchanged one costs nothing.
MCP_NPM_PINS = mcptools/testdata/npm
MCP_NPM_DIR  = .cache/npm
mcp-servers:
	@if ! cmp -s $(MCP_NPM_PINS)/package-lock.json $(MCP_NPM_DIR)/package-lock.json || [ ! -d $(MCP_NPM_DIR)/node_modules/.bin ]; then \
		command -v npm >/dev/null 2>&1 || { echo "mcp-servers: npm is needed (Node.js)"; exit 1; }; \
		rm -rf $(MCP_NPM_DIR) && mkdir -p $(MCP_NPM_DIR) && \
		cp $(MCP_NPM_PINS)/package.json $(MCP_NPM_PINS)/package-lock.json $(MCP_NPM_DIR)/ && \
		npm ci --prefix $(MCP_NPM_DIR) --no-audit --no-fund --loglevel=error; \
	fi

# The real OTLP receiver of cmd/chorus's end-to-end telemetry test
# (TestBatchTracesInJaeger): Jaeger v1.76 built from the module proxy into
# .cache/jaeger (gitignored), once per version. Its go.mod has replace
# directives, so go install cannot build it: the module's source is copied
# out of the module cache and built as its own main module. A cold build
# takes minutes on 2 cores; the build cache makes later ones quick.
JAEGER_VERSION = v1.76.0
JAEGER_DIR     = .cache/jaeger
JAEGER_BIN     = $(JAEGER_DIR)/jaeger-$(JAEGER_VERSION)
jaeger: $(JAEGER_BIN)
$(JAEGER_BIN):
	@mkdir -p $(JAEGER_DIR)
	@src=$$($(GO) mod download -json github.com/jaegertracing/jaeger@$(JAEGER_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
		test -n "$$src" || { echo "jaeger: go mod download failed"; exit 1; }; \
		rm -rf $(JAEGER_DIR)/src-$(JAEGER_VERSION) && cp -r $$src $(JAEGER_DIR)/src-$(JAEGER_VERSION) && chmod -R u+w $(JAEGER_DIR)/src-$(JAEGER_VERSION) && \
		cd $(JAEGER_DIR)/src-$(JAEGER_VERSION) && GOFLAGS="-mod=mod -buildvcs=false" $(GO) build -o $(CURDIR)/$(JAEGER_BIN).tmp ./cmd/jaeger && mv $(CURDIR)/$(JAEGER_BIN).tmp $(CURDIR)/$(JAEGER_BIN)

# The official SDKs that gateway's tests drive under Node (TestOpenAINodeSDK
# and the other *NodeSDK tests), pinned exactly by gateway/testdata/npm
# (package.json and its package-lock.json) and installed with npm ci into
# .cache/npm-sdk (gitignored). Under make, those tests fail instead of
# skipping when the SDKs are missing.
SDK_NPM_PINS = gateway/testdata/npm
SDK_NPM_DIR  = .cache/npm-sdk
sdk-clients:
	@if ! cmp -s $(SDK_NPM_PINS)/package-lock.json $(SDK_NPM_DIR)/package-lock.json || [ ! -d $(SDK_NPM_DIR)/node_modules/openai ]; then \
		command -v npm >/dev/null 2>&1 || { echo "sdk-clients: npm is needed (Node.js)"; exit 1; }; \
		rm -rf $(SDK_NPM_DIR) && mkdir -p $(SDK_NPM_DIR) && \
		cp $(SDK_NPM_PINS)/package.json $(SDK_NPM_PINS)/package-lock.json $(SDK_NPM_DIR)/ && \
		npm ci --prefix $(SDK_NPM_DIR) --no-audit --no-fund --loglevel=error; \
	fi
export CHORUS_REQUIRE_SDK = 1

# The official Go SDKs (openai-go, anthropic-sdk-go, google.golang.org/genai)
# against the gateway, from gateway/sdktest: a module of its own (a replace
# to ../..), so the root go.mod never requires them.
sdk-go:
	cd gateway/sdktest && GOFLAGS="$(GOFLAGS) -mod=mod" $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

# Chorus as the model layer of eino, Genkit and LangChainGo, from
# integrations/<framework>: each a module of its own (a replace to ../..),
# so the root go.mod never requires a framework. Vet, then the tests
# (the frameworks' own agents against llmtest) and the Example functions.
INTEGRATIONS = eino einosession genkit langchaingo
integrations:
	@set -e; for m in $(INTEGRATIONS); do \
		echo "integrations/$$m"; \
		(cd integrations/$$m && GOFLAGS="$(GOFLAGS) -mod=mod" $(GO) vet ./... && \
			GOFLAGS="$(GOFLAGS) -mod=mod" $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...); \
	done

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags partitions ./cluster/

# cluster runs without the race detector: Proto.Actor's cluster has
# data races of its own (its member list and rendezvous are read without a
# lock, its remote's shutdown, the gRPC logger it sets per node) that the
# detector reports in any multi-node test. Every other package runs with it.
# Under the race detector the sessions' scale test hosts 1,000 sessions
# (each turn costs ~14 ms of CPU there); it runs again without it at the
# 10,000 the idle-passivation promise is checked at.
CLUSTER_PKGS = ./cluster/...
race:
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list $(PKGS) | grep -v '/chorus/cluster')
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(CLUSTER_PKGS)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestIdlePassivationAtScale$$' ./session/

# The cluster's tests again, under the race detector, through racefilter: a
# race report with an access in Chorus's own code fails the run; one whose
# accesses are inside Proto.Actor or gRPC is counted and printed (their own
# races, above). Pass or fail of the tests themselves is decided by race.
race-cluster:
	@log=$$(mktemp); $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(CLUSTER_PKGS) >$$log 2>&1; \
		$(GO) run ./internal/racefilter <$$log; status=$$?; \
		if [ $$status -ne 0 ]; then echo "race-cluster: the run's last lines:"; tail -40 $$log; fi; rm -f $$log; exit $$status

# Replays every recorded exchange of the corpus (CHORUS_FIXTURES, by default
# ../shared/fixtures beside the checkout; chat, Responses, the other
# operations) and prints the counts and the reasons for skips. Without the
# corpus its tests skip, saying so, unless CHORUS_REQUIRE_FIXTURES=1.
conformance:
	@log=$$(mktemp); $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^TestConformance' -v ./providers/ >$$log 2>&1; status=$$?; \
		grep -E 'conformance: ' $$log | grep -v 'conformance:   -' | sed 's/^ *//'; tail -1 $$log; rm -f $$log; exit $$status

# The exported API against the previous commit of main (the merge-base on a
# branch; APIDIFF_BASE to choose): an incompatible change fails unless
# CHANGELOG.md names it under ## [Unreleased] (.ci/apidiff.sh, tested by
# internal/apicheck). apidiff is pinned by .ci/apidiff/go.mod.
apidiff:
	.ci/apidiff.sh

# Benchmarks report numbers; they never fail the build.
# make bench: the peer comparison and soak (bench/, its own module) -> bench/RESULTS.md, bench/ratios.png
bench: bench-portkey
	cd bench && $(GO) run ./cmd/benchrun -out RESULTS.md -json RESULTS.json

# The Node gateway of the peer gateway scenario (bench/internal/peergw):
# @portkey-ai/gateway pinned exactly by bench/internal/peergw/testdata/npm
# and installed with npm ci into .cache/npm-portkey (gitignored), once per
# lock file. Without npm it says so and goes on: the scenario then reports
# Portkey's cases as not run.
PORTKEY_NPM_PINS = bench/internal/peergw/testdata/npm
PORTKEY_NPM_DIR  = .cache/npm-portkey
bench-portkey:
	@if ! cmp -s $(PORTKEY_NPM_PINS)/package-lock.json $(PORTKEY_NPM_DIR)/package-lock.json || [ ! -d $(PORTKEY_NPM_DIR)/node_modules/@portkey-ai/gateway ]; then \
		command -v npm >/dev/null 2>&1 || { echo "bench-portkey: no npm (Node.js): the peer gateway scenario reports Portkey as not run"; exit 0; }; \
		rm -rf $(PORTKEY_NPM_DIR) && mkdir -p $(PORTKEY_NPM_DIR) && \
		cp $(PORTKEY_NPM_PINS)/package.json $(PORTKEY_NPM_PINS)/package-lock.json $(PORTKEY_NPM_DIR)/ && \
		npm ci --prefix $(PORTKEY_NPM_DIR) --no-audit --no-fund --loglevel=error; \
	fi

# make bench-gateways: the peer gateway scenario alone (Chorus's gateway, a
# reverse proxy and Portkey on one upstream, HTTP/1.1 and h2c, buffered and
# streamed; about 4 minutes), replacing only its section of
# bench/RESULTS.md. Not run by CI. PEERGW_PROFILE=DIR also has Chorus's
# gateway write a CPU profile of each case there.
bench-gateways: bench-portkey
	cd bench && $(GO) run ./cmd/benchrun -only peergw -soak 0 -splice -out RESULTS.md $(if $(PEERGW_PROFILE),-peergw-profile $(PEERGW_PROFILE))

# make bench-check: the bench module (its own go.mod) vetted and its tests run
# in short mode (scenarios on tiny sizes, no peer run, no report). CI runs it.
# -mod=mod: the bench module follows the root module by a replace, so a
# requirement added at the root must not break its check before its go.mod
# is tidied.
bench-check:
	cd bench && GOFLAGS="$(GOFLAGS) -mod=mod" $(GO) vet ./... && GOFLAGS="$(GOFLAGS) -mod=mod" $(GO) test -short -count=1 -timeout $(TEST_TIMEOUT) ./...

# make soak-partitions: TestPartitionSoak for SOAK (default 30m): random faults between the
# cluster's member processes and PostgreSQL (a member cut off or flapping, PostgreSQL cut off,
# gone or slow, SIGKILL) under sessions and batches, the whole history checked at the end;
# its report -> bench/soak-partitions.md. Not in CI (make partitions runs two faults).
SOAK ?= 30m
soak-partitions:
	CHORUS_SOAK=$(SOAK) CHORUS_SOAK_REPORT=$(CURDIR)/bench/soak-partitions.md $(GO) test -tags partitions -count=1 -timeout 24h -run '^TestPartitionSoak$$' -v ./cluster/

# make partitions: the member-to-member partition tests (a member cut off from the others,
# a flapping link, a slow member) and a two-fault soak. Not in CI: they find an open failure
# (a session Wait refused as lease held after a cut member rejoins; docs/reliability.md).
partitions:
	$(GO) test -tags partitions -count=1 -timeout 1800s -run '^(TestMemberPartitionedFromTheOthers|TestFlappingMemberLink|TestSlowMember|TestPartitionSoak)$$' -v ./cluster/

# make gobench: the Go benchmarks of the hot path in this module's packages.
gobench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./providers/... ./actors/ ./runtime/ ./cluster/ ./pipeline/... ./store/

# Each fuzz target for FUZZTIME (go test runs one target at a time); the
# inputs a run finds are kept under the package's testdata/fuzz.
FUZZ_TARGETS = \
	./providers/internal/sse:FuzzReader \
	./providers/internal/jsonscan:FuzzWalk \
	./providers/internal/jsonscan:FuzzInPlaceDescent \
	./providers/internal/jsonscan:FuzzStrict \
	./internal/jsonenc:FuzzAppendString \
	./providers/openai:FuzzOpenAIStream \
	./providers/openai:FuzzOpenAIBuffered \
	./providers/openai:FuzzResponsesStream \
	./providers/openai:FuzzResponsesBuffered \
	./providers/openai:FuzzStreamDecoder \
	./providers/openai:FuzzParseChatFast \
	./providers/openai:FuzzDecodeChatFast \
	./providers/openai:FuzzAppendChat \
	./providers/anthropic:FuzzAnthropicStream \
	./providers/anthropic:FuzzAnthropicBuffered \
	./providers/anthropic:FuzzTextDelta \
	./providers/anthropic:FuzzFeed \
	./providers/gemini:FuzzGeminiStream \
	./providers/gemini:FuzzGeminiBuffered \
	./providers/gemini:FuzzStreamDecoder \
	./providers/gemini:FuzzAppendRequest \
	./gateway:FuzzAppendJSONString \
	./batch:FuzzBatchInputLine
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		mkdir -p $$pkg/testdata/fuzz/$$name; \
		cp -n $$($(GO) env GOCACHE)/fuzz/github.com/chorusrt/chorus/$${pkg#./}/$$name/* $$pkg/testdata/fuzz/$$name/ 2>/dev/null || true; \
	done

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

# The cluster's wire messages: Go generated from the checked-in .proto by
# protoc (Debian's protobuf-compiler, installed when missing) and
# protoc-gen-go pinned to the google.golang.org/protobuf of go.mod.
# proto-check regenerates into a temporary directory and fails when the
# checked-in Go differs (CI runs it).
PROTO_DIR = cluster/clusterpb
PROTOC_GEN_GO = google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
proto-tools:
	@command -v protoc >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq protobuf-compiler; }
	@GOBIN=$(CURDIR)/.bin $(GO) install $(PROTOC_GEN_GO)

proto: proto-tools
	cd $(PROTO_DIR) && protoc --plugin=protoc-gen-go=$(CURDIR)/.bin/protoc-gen-go --go_out=. --go_opt=paths=source_relative *.proto

proto-check: proto-tools
	@tmp=$$(mktemp -d) && cd $(PROTO_DIR) && \
	protoc --plugin=protoc-gen-go=$(CURDIR)/.bin/protoc-gen-go --go_out=$$tmp --go_opt=paths=source_relative *.proto && \
	for f in $$tmp/*.pb.go; do cmp -s $$f $$(basename $$f) || { echo "proto-check: $(PROTO_DIR)/$$(basename $$f) is stale: run make proto"; rm -rf $$tmp; exit 1; }; done; \
	rm -rf $$tmp; echo "proto-check: generated Go matches the .proto files"

# Against a real OpenAI-compatible server: OLLAMA_BASE_URL=http://127.0.0.1:11434/v1 make e2e
e2e:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'E2E' -v ./providers/
