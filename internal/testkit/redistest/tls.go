package redistest

import (
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
)

// TLSFiles writes a fresh CA and a server certificate for 127.0.0.1 into a
// directory of the test (removed when it ends), for Config.TLS.
func TLSFiles(tb testing.TB) redisserver.TLSFiles {
	tb.Helper()
	files, err := redisserver.WriteTLSFiles(tb.TempDir())
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return files
}
