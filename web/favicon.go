package web

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"sync"
)

// The inbox's icon: a white check mark on the accent blue, drawn here
// rather than shipped as a binary file, and served as /favicon.ico, the
// path browsers ask for unbidden.

// faviconSizes are the square sizes the icon file holds.
var faviconSizes = []int{16, 32, 48}

// favicon returns the icon file, made once.
var favicon = sync.OnceValue(func() []byte {
	var imgs [][]byte
	for _, n := range faviconSizes {
		var b bytes.Buffer
		if err := png.Encode(&b, drawIcon(n)); err != nil {
			panic("web: encode the favicon: " + err.Error()) // an in-memory RGBA always encodes
		}
		imgs = append(imgs, b.Bytes())
	}
	return icoFile(faviconSizes, imgs)
})

// icoFile packs PNG images into an ICO file: a header, one directory entry
// per image, then the images.
func icoFile(sizes []int, pngs [][]byte) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write(le.AppendUint16(nil, 0)) // reserved
	b.Write(le.AppendUint16(nil, 1)) // type: icon
	b.Write(le.AppendUint16(nil, uint16(len(pngs))))
	offset := 6 + 16*len(pngs)
	for i, img := range pngs {
		side := byte(sizes[i]) // 0 would mean 256
		b.Write([]byte{side, side, 0, 0})
		b.Write(le.AppendUint16(nil, 1))  // colour planes
		b.Write(le.AppendUint16(nil, 32)) // bits per pixel
		b.Write(le.AppendUint32(nil, uint32(len(img))))
		b.Write(le.AppendUint32(nil, uint32(offset)))
		offset += len(img)
	}
	for _, img := range pngs {
		b.Write(img)
	}
	return b.Bytes()
}

// drawIcon draws the icon n pixels square, each pixel sampled 4×4 times
// so that the edges are smooth.
func drawIcon(n int) *image.RGBA {
	accent := color.RGBA{0x0b, 0x5c, 0xad, 0xff}
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	const ss = 4
	for y := range n {
		for x := range n {
			var bg, mark float64
			for sy := range ss {
				for sx := range ss {
					// The point in a unit square.
					u := (float64(x) + (float64(sx)+0.5)/ss) / float64(n)
					v := (float64(y) + (float64(sy)+0.5)/ss) / float64(n)
					if inRoundedSquare(u, v, 0.2) {
						bg++
						if onCheck(u, v) {
							mark++
						}
					}
				}
			}
			bg /= ss * ss
			mark /= ss * ss
			// White over blue, both over transparency (premultiplied).
			r := float64(accent.R)*(bg-mark) + 255*mark
			g := float64(accent.G)*(bg-mark) + 255*mark
			bl := float64(accent.B)*(bg-mark) + 255*mark
			img.SetRGBA(x, y, color.RGBA{uint8(math.Round(r)), uint8(math.Round(g)), uint8(math.Round(bl)), uint8(math.Round(255 * bg))})
		}
	}
	return img
}

// inRoundedSquare reports whether (u, v) lies in the unit square with
// corners rounded to radius r.
func inRoundedSquare(u, v, r float64) bool {
	cx := math.Max(r, math.Min(1-r, u))
	cy := math.Max(r, math.Min(1-r, v))
	return math.Hypot(u-cx, v-cy) <= r
}

// onCheck reports whether (u, v) lies on the check mark's two strokes.
func onCheck(u, v float64) bool {
	const w = 0.075 // half the stroke width
	return segmentDist(u, v, 0.24, 0.52, 0.43, 0.71) <= w || segmentDist(u, v, 0.43, 0.71, 0.77, 0.31) <= w
}

// segmentDist is the distance from (px, py) to the segment (ax, ay)–(bx, by).
func segmentDist(px, py, ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	t := ((px-ax)*dx + (py-ay)*dy) / (dx*dx + dy*dy)
	t = math.Max(0, math.Min(1, t))
	return math.Hypot(px-(ax+t*dx), py-(ay+t*dy))
}

// handleFavicon serves the icon; browsers may keep it a day.
func handleFavicon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(favicon())
}
