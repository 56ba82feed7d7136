package redisserver

import "strings"

// KeySlot returns the cluster hash slot of key (CRC16/XMODEM of the key or of
// its {hash tag}, modulo 16384), so a test can pick keys that land in a slot
// it is about to move without asking a server.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % NumSlots
}
