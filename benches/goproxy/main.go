// The Go comparator of the load harness: the core of OpenYurt's YurtHub, a
// net/http/httputil.ReverseProxy in front of one apiserver that tees each successful
// response body to a file on disk while streaming it to the client. Standard library only;
// built by benches/load/run with Debian's Go (GO111MODULE=off).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// tee copies what the client reads into a temporary file, renamed over the response's cache
// file when the body is closed (as YurtHub's disk storage replaces a key).
type tee struct {
	body  io.ReadCloser
	file  *os.File
	final string
}

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.body.Read(p)
	if n > 0 && t.file != nil {
		if _, werr := t.file.Write(p[:n]); werr != nil {
			t.file.Close()
			os.Remove(t.file.Name())
			t.file = nil
		}
	}
	return n, err
}

func (t *tee) Close() error {
	err := t.body.Close()
	if t.file != nil {
		tmp := t.file.Name()
		t.file.Close()
		os.Rename(tmp, t.final)
	}
	return err
}

func main() {
	listen := flag.String("listen", "127.0.0.1:10261", "address to serve on")
	upstream := flag.String("upstream", "", "the apiserver URL")
	cacheDir := flag.String("cache-dir", "", "where response bodies are teed")
	caFile := flag.String("ca", "", "CA of the apiserver's serving certificate (https)")
	flag.Parse()

	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		log.Fatalf("bad -upstream %q: %v", *upstream, err)
	}
	tlsConfig := &tls.Config{}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			log.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tlsConfig.RootCAs = pool
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	// YurtHub's transport: keep-alive connections to the apiserver, HTTP/1.1.
	proxy.Transport = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
	}
	// Flush every write at once, as YurtHub does, so watch events are not held back.
	proxy.FlushInterval = -1
	var sequence uint64
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK || *cacheDir == "" {
			return nil
		}
		key := strings.ReplaceAll(strings.Trim(resp.Request.URL.Path, "/"), "/", "_")
		final := filepath.Join(*cacheDir, key)
		n := atomic.AddUint64(&sequence, 1)
		file, err := os.Create(final + ".tmp" + strconv.FormatUint(n, 10))
		if err != nil {
			return nil
		}
		resp.Body = &tee{body: resp.Body, file: file, final: final}
		return nil
	}
	log.Printf("serving on %s for %s", *listen, target)
	log.Fatal(http.ListenAndServe(*listen, proxy))
}
