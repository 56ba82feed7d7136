// Package faultproxy is a loopback TCP proxy for tests that must see what a
// real network fault does to a real client: a reply lost after the server
// already ran the command, or a connection cut on demand.
package faultproxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
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
			if _, werr := server.Write(buf[:n]); werr != nil {
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
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if armed.Load() {
				p.dropped.Add(1)
				return
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
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
