package synth

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// post sends a generation request body to srv.
func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/generate", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readStream reads a generation's JSON lines.
func readStream(t *testing.T, r io.Reader) (text string, chunks []GenerateChunk) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var c GenerateChunk
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("stream line %q: %v", sc.Text(), err)
		}
		chunks = append(chunks, c)
		text += c.Text
	}
	return text, chunks
}

func newTestServer(t *testing.T, o ServeOptions, names ...string) (*Server, *httptest.Server, map[string]*Model) {
	t.Helper()
	models := map[string]*Model{}
	for _, n := range names {
		models[n] = newPerturbed(t, n)
	}
	s, err := NewServer(models, o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(s.Cancel)
	return s, ts, models
}

// TestServeStream: the stream's text is Sample's with the same options
// (odd_ffn: vocabulary of 75 bytes, all ASCII; n 24, so 60 bytes go
// beyond the window), in several chunks, ended by a done line.
func TestServeStream(t *testing.T) {
	_, ts, models := newTestServer(t, ServeOptions{Workers: 2}, "odd_ffn")
	for _, temp := range []float64{0, 0.9} {
		resp := post(t, context.Background(), ts.URL, fmt.Sprintf(`{"prompt":"CAFE","max_bytes":60,"temperature":%g,"top_k":5,"seed":7}`, temp))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		text, chunks := readStream(t, resp.Body)
		resp.Body.Close()
		want, err := models["odd_ffn"].Sample(context.Background(), []byte("CAFE"), SampleOptions{Len: 60, Temp: temp, TopK: 5, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if text != string(want) {
			t.Errorf("temperature %g: stream %q, Sample %q", temp, text, want)
		}
		last := chunks[len(chunks)-1]
		if len(chunks) < 4 || !last.Done || last.Bytes != 60 || last.Model != "odd_ffn" {
			t.Errorf("temperature %g: %d chunks, last %+v", temp, len(chunks), last)
		}
	}
}

// TestServeEndpoints: /v1/models, /healthz, and the 4xx answers, each a
// JSON error naming what is wrong.
func TestServeEndpoints(t *testing.T) {
	_, ts, _ := newTestServer(t, ServeOptions{MaxBody: 200, MaxPrompt: 50, MaxBytes: 100}, "odd_ffn", "small")
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Models []ModelInfo }
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Models) != 2 || list.Models[0].Name != "odd_ffn" || list.Models[1].Name != "small" || list.Models[1].Params == 0 {
		t.Errorf("/v1/models: %+v", list)
	}
	resp, err = http.Get(ts.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small"`, 400, "request body"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small","colour":1}`, 400, "colour"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small"} {}`, 400, "one JSON object"},
		{"POST", "/v1/generate", `{"prompt":"ab"}`, 400, "model: required"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"big"}`, 404, `model "big"`},
		{"POST", "/v1/generate", `{"prompt":"","model":"small"}`, 400, "prompt: must not be empty"},
		{"POST", "/v1/generate", `{"prompt":"` + strings.Repeat("a", 51) + `","model":"small"}`, 400, "prompt: 51 bytes, the limit is 50"},
		{"POST", "/v1/generate", `{"prompt":"` + strings.Repeat("a", 300) + `","model":"small"}`, 413, "larger than the limit of 200"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small","max_bytes":101}`, 400, "max_bytes"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small","max_bytes":-1}`, 400, "max_bytes"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small","temperature":-1}`, 400, "temperature"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small","top_k":-3}`, 400, "top_k"},
		{"POST", "/v1/generate", `{"prompt":"ab","model":"small","seed":-3}`, 400, "seed"},
		{"POST", "/v1/generate", `{"prompt":"a~","model":"odd_ffn"}`, 400, "outside the model's vocabulary"},
		{"GET", "/v1/generate", ``, 405, "POST"},
		{"POST", "/v1/models", ``, 405, "GET"},
		{"GET", "/v2/x", ``, 404, "no such endpoint"},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.code || err != nil || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s %s %s: %d %q (%v), want %d and an error about %q", c.method, c.path, c.body, resp.StatusCode, e.Error, err, c.code, c.want)
		}
	}
}

// TestServeConcurrent: many clients at once (more than the workers) all
// get their text, Sample's for their seed, within a bounded time; past
// MaxStreams open streams a request is refused with 429.
func TestServeConcurrent(t *testing.T) {
	s, ts, models := newTestServer(t, ServeOptions{Workers: 2, MaxStreams: 32}, "odd_ffn")
	const clients = 16
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	texts := make([]string, clients)
	codes := make([]int, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := post(t, ctx, ts.URL, fmt.Sprintf(`{"prompt":"BEAD","max_bytes":50,"temperature":1,"seed":%d}`, i))
			defer resp.Body.Close()
			codes[i] = resp.StatusCode
			texts[i], _ = readStream(t, resp.Body)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the clients took longer than 60 s")
	}
	for i := 0; i < clients; i++ {
		want, _ := models["odd_ffn"].Sample(context.Background(), []byte("BEAD"), SampleOptions{Len: 50, Temp: 1, Seed: uint64(i)})
		if codes[i] != 200 || texts[i] != string(want) {
			t.Errorf("client %d: %d %q, want %q", i, codes[i], texts[i], want)
		}
	}
	// Fill the stream slots: the next request is refused.
	for i := 0; i < cap(s.slots); i++ {
		s.slots <- struct{}{}
	}
	resp := post(t, ctx, ts.URL, `{"prompt":"BEAD"}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "too many streams") {
		t.Errorf("with every slot taken: %d %s", resp.StatusCode, body)
	}
	for i := 0; i < cap(s.slots); i++ {
		<-s.slots
	}
}

// TestServeCancel: a client that goes away stops its generation (long
// before its max_bytes), and its decoder returns to the free list; Cancel ends
// the streams in flight with an error line and refuses new ones.
func TestServeCancel(t *testing.T) {
	s, ts, _ := newTestServer(t, ServeOptions{Workers: 1, MaxBytes: 100000}, "vanilla")
	done := make(chan int, 4)
	s.onDone = func(n int) { done <- n }

	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, ts.URL, `{"prompt":"The light","max_bytes":100000}`)
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case n := <-done:
		if n >= 100000 {
			t.Errorf("the generation ran to its end (%d bytes) after the client left", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the generation did not stop within 20 s of the client leaving")
	}
	if got := len(s.models["vanilla"].free); got != 1 {
		t.Errorf("%d free decoders after the stream, want 1", got)
	}

	// Cancel during a stream.
	resp = post(t, context.Background(), ts.URL, `{"prompt":"The light","max_bytes":100000}`)
	br = bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	s.Cancel()
	_, chunks := readStream(t, br)
	resp.Body.Close()
	if len(chunks) == 0 || !strings.Contains(chunks[len(chunks)-1].Error, "shutting down") {
		t.Errorf("stream after Cancel ended with %+v", chunks[len(chunks)-1:])
	}
	<-done
	resp = post(t, context.Background(), ts.URL, `{"prompt":"x"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after Cancel: status %d, want 503", resp.StatusCode)
	}
}

// TestServeLimits: Workers and MaxStreams beyond their bounds (which
// would start that many goroutines, or reserve that many slots) are errors
// naming them, the bounds themselves are not.
func TestServeLimits(t *testing.T) {
	models := map[string]*Model{"small": newPerturbed(t, "small")}
	for _, c := range []struct {
		o    ServeOptions
		want string
	}{
		{ServeOptions{Workers: MaxWorkers() + 1}, "Workers"},
		{ServeOptions{Workers: 1 << 30}, "Workers"},
		{ServeOptions{MaxStreams: MaxServeStreams + 1}, "MaxStreams"},
		{ServeOptions{MaxStreams: 1 << 40}, "MaxStreams"},
		{ServeOptions{Workers: MaxWorkers(), MaxStreams: MaxServeStreams}, ""},
	} {
		h, err := NewServer(models, c.o)
		if h != nil {
			h.Cancel()
		}
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.o, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error about %s", c.o, err, c.want)
		}
	}
}

// TestServeListen: Serve listens, answers, and returns when its context
// ends.
func TestServeListen(t *testing.T) {
	h, err := NewServer(map[string]*Model{"small": newPerturbed(t, "small")}, ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, "127.0.0.1:0", h, func(a string) { addrc <- a }) }()
	addr := <-addrc
	resp, err := http.Post("http://"+addr+"/v1/generate", "application/json", strings.NewReader(`{"prompt":"ab","max_bytes":5}`))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := readStream(t, resp.Body)
	resp.Body.Close()
	if len(text) == 0 {
		t.Error("no text")
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// BenchmarkServe measures the server under a bounded concurrent load:
// clients (4 and 16) each send requests for 128 bytes from a 16-byte
// prompt to a Server with one worker per core (spec random, n 128),
// reporting the bytes per second of all streams together and the median
// time to the first chunk and to the end of a stream.
//
//	go test ./runtime/synth -run '^$' -bench BenchmarkServe -benchtime 2x
func BenchmarkServe(b *testing.B) {
	m := newPerturbed(b, "random")
	s, err := NewServer(map[string]*Model{"random": m}, ServeOptions{MaxStreams: 64})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer s.Cancel()
	for _, clients := range []int{4, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var mu sync.Mutex
			var first, total []time.Duration
			bytes := 0
			for b.Loop() {
				var wg sync.WaitGroup
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						t0 := time.Now()
						resp, err := http.Post(ts.URL+"/v1/generate", "application/json",
							strings.NewReader(fmt.Sprintf(`{"prompt":"The light of the","max_bytes":128,"temperature":0.8,"seed":%d}`, c)))
						if err != nil {
							b.Error(err)
							return
						}
						defer resp.Body.Close()
						sc := bufio.NewScanner(resp.Body)
						var t1 time.Duration
						n := 0
						for sc.Scan() {
							if t1 == 0 {
								t1 = time.Since(t0)
							}
							var ch GenerateChunk
							json.Unmarshal(sc.Bytes(), &ch)
							if ch.Done {
								n = ch.Bytes
							}
						}
						mu.Lock()
						first = append(first, t1)
						total = append(total, time.Since(t0))
						bytes += n
						mu.Unlock()
					}()
				}
				wg.Wait()
			}
			median := func(d []time.Duration) float64 {
				sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
				return float64(d[len(d)/2].Microseconds()) / 1000
			}
			b.ReportMetric(float64(bytes)/b.Elapsed().Seconds(), "bytes/s")
			b.ReportMetric(median(first), "first-ms")
			b.ReportMetric(median(total), "stream-ms")
		})
	}
}
