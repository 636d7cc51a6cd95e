// Reading results.json into the structs of results_json.h. Each reader takes
// the JSON node and a path such as "methods[2].mean" for its errors.
#include "train/results_json.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/common.h"

namespace ada::report {

namespace {

using T = Json::Type;

struct Reader {
  std::string source;  // the file, for error messages

  [[noreturn]] void bad(const std::string& where, const std::string& what) const {
    fail(source + ": " + (where.rfind('.', 0) == 0 ? where.substr(1) : where) + " " + what);
  }
  // The member key of object o as a number: NaN when absent or null.
  double num(const Json& o, const std::string& key, const std::string& where) const {
    const Json* v = o.find(key);
    if (!v || v->is(T::Null)) return NAN;
    if (!v->is(T::Number)) bad(where + "." + key, "is not a number");
    return v->number;
  }
  std::string str(const Json& o, const std::string& key, const std::string& where) const {
    const Json* v = o.find(key);
    if (!v || v->is(T::Null)) return "";
    if (!v->is(T::String)) bad(where + "." + key, "is not a string");
    return v->text;
  }
  // The member key as an array (nullptr when absent or null).
  const Json* arr(const Json& o, const std::string& key, const std::string& where) const {
    const Json* v = o.find(key);
    if (!v || v->is(T::Null)) return nullptr;
    if (!v->is(T::Array)) bad(where + "." + key, "is not an array");
    return v;
  }
  const Json* obj(const Json& o, const std::string& key, const std::string& where) const {
    const Json* v = o.find(key);
    if (!v || v->is(T::Null)) return nullptr;
    if (!v->is(T::Object)) bad(where + "." + key, "is not an object");
    return v;
  }
  // Array items as numbers (null -> NaN).
  std::vector<double> nums(const Json* a, const std::string& where) const {
    std::vector<double> out;
    if (!a) return out;
    for (size_t i = 0; i < a->items.size(); i++) {
      const Json& v = a->items[i];
      if (v.is(T::Null)) out.push_back(NAN);
      else if (v.is(T::Number)) out.push_back(v.number);
      else bad(where + "[" + std::to_string(i) + "]", "is not a number");
    }
    return out;
  }

  Figures figures(const Json* o, const std::string& where) const {
    Figures f = nan_figures();
    if (!o) return f;
    f.val_loss = num(*o, "val_loss", where);
    f.accuracy = num(*o, "accuracy", where);
    f.passes = num(*o, "passes", where);
    f.train_flops = num(*o, "train_flops", where);
    f.infer_flops = num(*o, "infer_flops", where);
    f.infer_other = num(*o, "infer_other", where);
    f.infer_us = num(*o, "infer_us", where);
    return f;
  }

  // {"1": 0, "2": 10, ...}: keys are whole pass counts.
  std::vector<std::pair<int, double>> pass_hist(const Json* o, const std::string& where) const {
    std::vector<std::pair<int, double>> h;
    if (!o) return h;
    for (const auto& [k, v] : o->members) {
      char* end = nullptr;
      const long p = std::strtol(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || p < 0) bad(where + ".\"" + k + "\"", "is not a whole number of passes");
      if (!v.is(T::Number)) bad(where + ".\"" + k + "\"", "is not a number");
      h.emplace_back(int(p), v.number);
    }
    std::sort(h.begin(), h.end());
    return h;
  }

  Run run(const Json& o, const std::vector<std::string>& classes, const std::string& where) const {
    if (!o.is(T::Object)) bad(where, "is not an object");
    Run r;
    r.seed = num(o, "seed", where);
    r.dir = str(o, "dir", where);
    r.machine = str(o, "machine", where);
    r.date = str(o, "date", where);
    r.figures = figures(&o, where);
    r.pass_hist = pass_hist(obj(o, "pass_hist", where), where + ".pass_hist");
    r.per_class = per_class(obj(o, "per_class", where), classes, where + ".per_class");
    return r;
  }

  // [mean, std] (or a bare number, or null) into *mean and *sd.
  void mean_std(const Json& o, const std::string& key, const std::string& where, double* mean, double* sd) const {
    *mean = *sd = NAN;
    const Json* v = o.find(key);
    if (!v || v->is(T::Null)) return;
    if (v->is(T::Number)) { *mean = v->number; return; }
    if (!v->is(T::Array) || v->items.size() != 2) bad(where + "." + key, "is not [mean, std]");
    const std::vector<double> ms = nums(v, where + "." + key);
    *mean = ms[0], *sd = ms[1];
  }

  // The method's per_class object, in the order of the study's classes
  // (classes it lacks get NaN figures).
  std::vector<ClassFigures> per_class(const Json* o, const std::vector<std::string>& classes,
                                      const std::string& where) const {
    std::vector<ClassFigures> out;
    for (const std::string& name : classes) {
      ClassFigures c{name, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
      const Json* v = o ? o->find(name) : nullptr;
      if (v && !v->is(T::Null)) {
        const std::string w = where + "." + name;
        if (!v->is(T::Object)) bad(w, "is not an object");
        c.tokens = num(*v, "tokens", w);
        mean_std(*v, "accuracy", w, &c.accuracy, &c.accuracy_std);
        mean_std(*v, "nll", w, &c.nll, &c.nll_std);
        mean_std(*v, "passes", w, &c.passes, &c.passes_std);
      }
      out.push_back(c);
    }
    return out;
  }

  Knob knob(const Json* o, const std::string& where) const {
    Knob k;
    if (!o) return k;
    k.name = str(*o, "name", where);
    if (const Json* pts = arr(*o, "points", where))
      for (size_t i = 0; i < pts->items.size(); i++) {
        const Json& p = pts->items[i];
        const std::string w = where + ".points[" + std::to_string(i) + "]";
        if (!p.is(T::Object)) bad(w, "is not an object");
        k.points.push_back({num(p, "value", w), num(p, "val_loss", w), num(p, "accuracy", w), num(p, "infer_flops", w),
                            num(p, "passes", w)});
      }
    if (k.name.empty() && !k.points.empty()) k.name = "knob";
    return k;
  }

  Method method(const Json& o, const std::vector<std::string>& classes, const std::string& where) const {
    if (!o.is(T::Object)) bad(where, "is not an object");
    Method m;
    m.label = str(o, "label", where);
    if (m.label.empty()) bad(where, "has no label");
    m.spec = str(o, "spec", where);
    m.method = str(o, "method", where);
    if (const Json* runs = arr(o, "runs", where))
      for (size_t i = 0; i < runs->items.size(); i++)
        m.runs.push_back(run(runs->items[i], classes, where + ".runs[" + std::to_string(i) + "]"));
    m.mean = figures(obj(o, "mean", where), where + ".mean");
    m.std = figures(obj(o, "std", where), where + ".std");
    m.per_class = per_class(obj(o, "per_class", where), classes, where + ".per_class");
    if (const Json* bins = arr(o, "passes_by_nll", where))
      for (size_t i = 0; i < bins->items.size(); i++) {
        const Json& b = bins->items[i];
        const std::string w = where + ".passes_by_nll[" + std::to_string(i) + "]";
        if (!b.is(T::Object)) bad(w, "is not an object");
        m.passes_by_nll.push_back({num(b, "nll_lo", w), num(b, "nll_hi", w), num(b, "tokens", w), num(b, "passes", w)});
      }
    if (const Json* rows = arr(o, "by_depth", where))
      for (size_t i = 0; i < rows->items.size(); i++) {
        const Json& row = rows->items[i];
        const std::string w = where + ".by_depth[" + std::to_string(i) + "]";
        if (!row.is(T::Object)) bad(w, "is not an object");
        ClassDepths cd{str(row, "class", w), {}};
        if (const Json* cells = arr(row, "cells", w))
          for (size_t k = 0; k < cells->items.size(); k++) {
            const std::string wc = w + ".cells[" + std::to_string(k) + "]";
            const std::vector<double> v = nums(&cells->items[k], wc);
            if (v.size() != 4) bad(wc, "is not [passes, tokens, accuracy, nll]");
            cd.cells.push_back({v[0], v[1], v[2], v[3]});
          }
        m.by_depth.push_back(cd);
      }
    m.knob = knob(obj(o, "knob", where), where + ".knob");
    return m;
  }

  Pair pair(const Json& o, const std::string& where) const {
    if (!o.is(T::Object)) bad(where, "is not an object");
    Pair p{str(o, "a", where), str(o, "b", where), num(o, "diff", where), num(o, "se", where),
           num(o, "se_tokens", where), num(o, "se_seeds", where), num(o, "tokens", where), {}};
    if (const Json* ps = arr(o, "per_seed", where))
      for (size_t i = 0; i < ps->items.size(); i++) {
        const Json& s = ps->items[i];
        const std::string w = where + ".per_seed[" + std::to_string(i) + "]";
        if (!s.is(T::Object)) bad(w, "is not an object");
        const Json* md = s.find("machines_differ");
        if (md && !md->is(T::Bool) && !md->is(T::Null)) bad(w + ".machines_differ", "is not true or false");
        p.per_seed.push_back({num(s, "seed", w), num(s, "diff", w), num(s, "se", w), md && md->is(T::Bool) && md->boolean});
      }
    return p;
  }

  Passage passage(const Json* o, const std::vector<Method>& methods, size_t n_classes) const {
    Passage p;
    if (!o) return p;
    const std::string where = "passage";
    if (const Json* toks = arr(*o, "tokens", where))
      for (size_t i = 0; i < toks->items.size(); i++) {
        if (!toks->items[i].is(T::String)) bad(where + ".tokens[" + std::to_string(i) + "]", "is not a string");
        p.tokens.push_back(toks->items[i].text);
      }
    for (double c : nums(arr(*o, "classes", where), where + ".classes")) {
      if (!(c >= 0 && c < double(n_classes) && c == std::floor(c)))
        bad(where + ".classes", "has " + std::to_string(c) + ", not the index of one of the " +
                                    std::to_string(n_classes) + " classes");
      p.classes.push_back(int(c));
    }
    if (!p.classes.empty() && p.classes.size() != p.tokens.size())
      bad(where + ".classes", "has " + std::to_string(p.classes.size()) + " entries for " +
                                  std::to_string(p.tokens.size()) + " tokens");
    const Json* ms = obj(*o, "methods", where);
    for (const Method& m : methods) {
      const Json* v = ms ? ms->find(m.label) : nullptr;
      if (!v || v->is(T::Null)) continue;
      const std::string w = where + ".methods." + m.label;
      if (!v->is(T::Object)) bad(w, "is not an object");
      PassageRow row{m.label, nums(arr(*v, "passes", w), w + ".passes"), nums(arr(*v, "nll", w), w + ".nll")};
      if (row.passes.size() != p.tokens.size())
        bad(w + ".passes", "has " + std::to_string(row.passes.size()) + " entries for " +
                               std::to_string(p.tokens.size()) + " tokens");
      row.nll.resize(p.tokens.size(), NAN);  // NLL is optional
      p.rows.push_back(std::move(row));
    }
    return p;
  }
};

// A setup value as display text.
std::string setup_text(const Json& v) {
  switch (v.type) {
    case T::String: return v.text;
    case T::Number: return v.text.empty() ? std::to_string(v.number) : v.text;
    case T::Bool: return v.boolean ? "true" : "false";
    case T::Null: return "";
    case T::Array: {
      std::string s;
      for (const Json& x : v.items) s += (s.empty() ? "" : ", ") + setup_text(x);
      return s;
    }
    case T::Object: return "{...}";
  }
  return "";
}

}  // namespace

Figures nan_figures() { return {NAN, NAN, NAN, NAN, NAN, NAN, NAN}; }

std::string Results::setup_value(const std::string& key) const {
  for (const auto& [k, v] : setup)
    if (k == key) return v;
  return "";
}

Results parse_results(const Json& doc, const std::string& source) {
  const Reader r{source};
  check(doc.is(T::Object), source + ": not a JSON object (expected a study's results.json)");
  const Json* schema = doc.find("schema");
  check(schema && schema->is(T::Number), source + ": no \"schema\" number (expected a study's results.json)");
  check(schema->number == 1, source + ": schema " + schema->text + " is not supported (this report reads schema 1)");
  Results res;
  if (const Json* setup = r.obj(doc, "setup", ""))
    for (const auto& [k, v] : setup->members) res.setup.emplace_back(k, setup_text(v));
  if (const Json* cls = r.arr(doc, "classes", ""))
    for (size_t i = 0; i < cls->items.size(); i++) {
      if (!cls->items[i].is(T::String)) r.bad("classes[" + std::to_string(i) + "]", "is not a string");
      res.classes.push_back(cls->items[i].text);
    }
  const Json* methods = r.arr(doc, "methods", "");
  check(methods != nullptr, source + ": no \"methods\" array");
  for (size_t i = 0; i < methods->items.size(); i++)
    res.methods.push_back(r.method(methods->items[i], res.classes, "methods[" + std::to_string(i) + "]"));
  if (const Json* pairs = r.arr(doc, "pairs", ""))
    for (size_t i = 0; i < pairs->items.size(); i++)
      res.pairs.push_back(r.pair(pairs->items[i], "pairs[" + std::to_string(i) + "]"));
  res.passage = r.passage(r.obj(doc, "passage", ""), res.methods, res.classes.size());
  return res;
}

Results read_results(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(bool(f), "cannot read " + path + " (is it a study folder? run ./study first)");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_results(parse_json(ss.str(), path), path);
}

}  // namespace ada::report
