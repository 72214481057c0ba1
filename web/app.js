// Duet demo page logic (filled in by the demo page).
