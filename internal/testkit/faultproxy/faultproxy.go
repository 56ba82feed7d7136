// Package faultproxy is a loopback TCP proxy for tests that must see what a
// real network fault does to a real client: a reply lost after the server
// already ran the command, or a connection cut on demand.
package faultproxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections from its loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	pattern []byte // drop the reply to the next request containing this
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup

	dropped atomic.Int64
	// up and down are the latencies added to each direction (ns).
	up, down atomic.Int64
}

// Start listens on 127.0.0.1 (a free port) and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropReplyTo arms the proxy: the first request that contains pattern is
// forwarded to the server, and then the connection is cut before the reply
// reaches the client. The server has run the command; the client sees EOF.
func (p *Proxy) DropReplyTo(pattern []byte) {
	p.mu.Lock()
	p.pattern = append([]byte(nil), pattern...)
	p.mu.Unlock()
}

// SetDelay adds latency to each direction from now on: up to what the
// client sends, down to what the server answers. Each chunk read is
// written that much later, chunks in order (a latency, not a bandwidth:
// chunks in flight overlap). Zero removes it.
func (p *Proxy) SetDelay(up, down time.Duration) {
	p.up.Store(int64(up))
	p.down.Store(int64(down))
}

// Dropped counts the replies dropped so far.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// CutAll closes every open connection.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client, true)
		p.track(server, true)
		var armed atomic.Bool
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.upstream(client, server, &armed)
		}()
		go func() {
			defer p.wg.Done()
			p.downstream(server, client, &armed)
		}()
	}
}

// upstream copies requests; a request matching the armed pattern marks the
// connection so its next reply is dropped.
func (p *Proxy) upstream(client, server net.Conn, armed *atomic.Bool) {
	defer p.closePair(client, server)
	w := p.delayed(server, &p.up)
	defer w.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.pattern != nil && bytes.Contains(buf[:n], p.pattern) {
				p.pattern = nil
				armed.Store(true)
			}
			p.mu.Unlock()
			if werr := w.write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) downstream(server, client net.Conn, armed *atomic.Bool) {
	defer p.closePair(client, server)
	w := p.delayed(client, &p.down)
	defer w.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if armed.Load() {
				p.dropped.Add(1)
				return
			}
			if werr := w.write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) closePair(a, b net.Conn) {
	_ = a.Close()
	_ = b.Close()
	p.track(a, false)
	p.track(b, false)
}

// delayedWriter writes chunks to a connection, each delay after it was
// read, in order; without a delay it writes at once.
type delayedWriter struct {
	to    net.Conn
	delay *atomic.Int64
	ch    chan chunk
	done  chan struct{}
	err   atomic.Bool // a write failed: the reader stops
	// queued: chunks went through ch, so later ones must too (in order);
	// only the reading goroutine calls write.
	queued bool
}

type chunk struct {
	b  []byte
	at time.Time
}

func (p *Proxy) delayed(to net.Conn, delay *atomic.Int64) *delayedWriter {
	w := &delayedWriter{to: to, delay: delay, ch: make(chan chunk, 1024), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for c := range w.ch {
			if w.err.Load() {
				continue
			}
			// The delay is the behaviour the proxy adds.
			time.Sleep(time.Until(c.at))
			if _, err := w.to.Write(c.b); err != nil {
				w.err.Store(true)
				_ = w.to.Close()
			}
		}
	}()
	return w
}

func (w *delayedWriter) write(b []byte) error {
	d := time.Duration(w.delay.Load())
	if d <= 0 && !w.queued {
		_, err := w.to.Write(b)
		return err
	}
	w.queued = true
	if w.err.Load() {
		return net.ErrClosed
	}
	w.ch <- chunk{b: append([]byte(nil), b...), at: time.Now().Add(d)}
	return nil
}

// close stops the writer once what it holds is written (or failed).
func (w *delayedWriter) close() {
	close(w.ch)
	<-w.done
}
