// The report page of a study: one self-contained HTML file (inline CSS and
// SVG, no script, no network) drawn from results.json. Sections, in order:
// the setup, the results table, the paired claims, loss against inference and
// training FLOPs, the passes histograms, passes by difficulty class and by
// token NLL, per-class accuracy, and a passage of validation text coloured by
// the passes each method spent on every token. Every section is present
// (with a note when the study has no data for it), so a page always has the
// same ids. The page is a pure function of the results: same input, same bytes.
#pragma once
#include <string>
#include <vector>

#include "train/results_json.h"

namespace ada::report {

// The ids of the page's <section>s, in page order.
const std::vector<std::string>& section_ids();

// The whole page.
std::string render_html(const Results& r);

// "a better" / "b better" when |diff| > 2 se (diff = loss(a) - loss(b), so a
// negative diff favours a), "level" otherwise, "" when diff or se is unknown.
std::string verdict(const Pair& p);

// The background colour (#rrggbb) of a token that took `passes` on a
// sequential scale from lo (pale) to hi (dark); grey for NaN.
std::string passes_color(double passes, double lo, double hi);

// A token as HTML text: entities for & < > " ', whitespace that would vanish
// shown as a small glyph (newline as U+21B5, tab as U+2192, other control
// characters as their Unicode control pictures).
std::string token_html(const std::string& tok);

}  // namespace ada::report
