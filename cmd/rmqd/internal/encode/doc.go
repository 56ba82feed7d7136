// Package encode writes the JSON answers of rmqd's hot routes (publish,
// consume) by hand, with the same bytes as encoding/json.
package encode
