package redisserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles names the PEM files of a TLS server: its certificate and key,
// and the CA bundle that verifies it (and that Redis would check client
// certificates against).
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// ClientConfig returns a client configuration that trusts only CAFile and
// expects a certificate for 127.0.0.1.
func (f TLSFiles) ClientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("redisserver: no certificate in %s", f.CAFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, nil
}

// WriteTLSFiles makes a throwaway CA and a server certificate it signed,
// valid for 127.0.0.1, ::1 and localhost for a day, and writes ca.pem,
// server.pem and server-key.pem into dir. Keys are ECDSA P-256: quick to
// make, and every TLS library Redis links accepts them.
func WriteTLSFiles(dir string) (TLSFiles, error) {
	files := TLSFiles{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server-key.pem"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, fmt.Errorf("redisserver: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redisserver test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return files, fmt.Errorf("redisserver: CA certificate: %w", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return files, fmt.Errorf("redisserver: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, fmt.Errorf("redisserver: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Redis uses the server certificate for its outgoing connections
		// too (replication, cluster bus), hence client auth as well.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return files, fmt.Errorf("redisserver: server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return files, fmt.Errorf("redisserver: %w", err)
	}
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{
		{files.CAFile, "CERTIFICATE", caDER},
		{files.CertFile, "CERTIFICATE", leafDER},
		{files.KeyFile, "PRIVATE KEY", keyDER},
	} {
		data := pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der})
		if err := os.WriteFile(f.path, data, 0o600); err != nil {
			return files, fmt.Errorf("redisserver: %w", err)
		}
	}
	return files, nil
}
