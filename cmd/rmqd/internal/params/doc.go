// Package params holds the bounds and defaults of the API's query
// parameters and reads them.
package params
