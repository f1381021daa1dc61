// Colours of the map and charts, per theme. Map colours are 0xAABBGGRR words for the pixel
// buffer; chart colours are CSS strings. One qualitative palette serves streams, tags and frames.
import { rgba, type MapPalette } from './draw.ts'

/** The app's themes (the state holds the user's choice). */
export type Theme = 'light' | 'dark'

/** Tableau-10 style hues, readable on light and dark backgrounds. */
export const SERIES = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac']

function hex(color: string): number {
  const v = Number.parseInt(color.slice(1), 16)
  return rgba((v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff)
}

export function mapPalette(theme: Theme): MapPalette {
  const dark = theme === 'dark'
  return {
    unreserved: dark ? rgba(24, 26, 31) : rgba(246, 247, 249),
    addressSpace: dark ? rgba(44, 48, 58) : rgba(226, 230, 238),
    free: dark ? rgba(70, 78, 92) : rgba(196, 203, 214),
    waste: dark ? rgba(190, 60, 60) : rgba(214, 80, 80),
    pending: dark ? rgba(230, 190, 60) : rgba(240, 180, 30),
    dead: dark ? rgba(110, 70, 80) : rgba(150, 110, 120),
    freedGhost: dark ? rgba(140, 150, 170) : rgba(120, 130, 150),
    edgeDarken: 0.35,
    categories: Uint32Array.from(SERIES.map(hex)),
    segmentOutline: dark ? rgba(200, 210, 230) : rgba(40, 48, 64),
  }
}

/** CSS colours of the legend entries, the same as the map's. */
export function legendColors(theme: Theme) {
  const dark = theme === 'dark'
  return {
    unreserved: dark ? '#181a1f' : '#f6f7f9',
    addressSpace: dark ? '#2c303a' : '#e2e6ee',
    free: dark ? '#464e5c' : '#c4cbd6',
    waste: dark ? '#be3c3c' : '#d65050',
    pending: dark ? '#e6be3c' : '#f0b41e',
    dead: dark ? '#6e4650' : '#966e78',
  }
}
