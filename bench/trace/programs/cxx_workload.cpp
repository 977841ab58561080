// C++ source compiled by clang++ (a real C++ program) while its allocations are
// recorded for the evaluation suite's traces. Never run; only compiled.
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
template <typename K, typename V> std::map<K, std::vector<V>> group(const std::vector<std::pair<K, V>> &in) {
  std::map<K, std::vector<V>> out;
  for (auto &kv : in) out[kv.first].push_back(kv.second);
  return out;
}
int main() {
  std::vector<std::pair<std::string, int>> v;
  for (int i = 0; i < 1000; i++) v.emplace_back(std::to_string(i % 37), i);
  auto g = group(v);
  std::unordered_map<std::string, std::set<double>> u;
  for (auto &kv : g) for (int x : kv.second) u[kv.first].insert(x * 0.5);
  std::regex re("([0-9]+)-([a-z]+)");
  std::smatch m; std::string s = "123-abc"; std::regex_search(s, m, re);
  std::ostringstream os; os << m[1] << u.size();
  std::vector<std::function<int(int)>> fs; for (int i = 0; i < 10; i++) fs.push_back([i](int x){ return x * i; });
  std::sort(v.begin(), v.end());
  std::cout << os.str() << fs[3](2) << std::endl;
}
