package scripts

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NameTakeover is the script a slot's owner runs when its term starts
// (ZooKeeper mode).
const NameTakeover = "takeover"

// Takeover raises a slot's owner epoch and returns the previous owner's
// deliveries in prepare to store at their original scores (takeover.lua).
var Takeover = load(NameTakeover)

// FencedPrefix starts the error reply of a script that refused a call
// because the caller's owner epoch is not the slot's current one.
const FencedPrefix = "RMQFENCED"

// IsFenced reports whether err is a script's refusal of a stale owner
// epoch: the call changed nothing, and another worker owns the slot now.
func IsFenced(err error) bool {
	var re redis.Error
	return err != nil && errors.As(err, &re) && strings.HasPrefix(re.Error(), FencedPrefix)
}
