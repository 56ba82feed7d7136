// Package quota holds the bounds on what one tenant may hold or keep busy
// (--max-* flags) and how a refusal is answered.
package quota
