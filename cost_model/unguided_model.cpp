// The unguided model: what the search does without a cost model. The tuner's
// `guided = false` (`fusetune tune --no-model`) ranks its evolved candidates
// by this model's scores, which are uniform and unrelated to the candidates'
// speed, so a round is a random draw from the population the evolution
// breeds from the measured bests. It is the baseline of issue 38's ablation:
// how many trials the learned model saves.
#include "common/hash.h"
#include "cost_model/cost_model.h"

namespace fusetune::cost_model {

namespace {

class UnguidedModel final : public CostModel {
 public:
  explicit UnguidedModel(uint64_t seed) : seed_(seed) {}
  std::string name() const override { return "none"; }
  std::string form() const override { return "random"; }

  // A candidate's score is a hash of its features and the seed: the same
  // candidate gets the same score whenever it is ranked (the same inputs
  // give the same plan), two candidates unrelated ones.
  std::vector<Prediction> Predict(const FeatureMatrix& x) const override {
    std::vector<Prediction> out(static_cast<size_t>(x.rows()));
    for (int64_t i = 0; i < x.rows(); ++i) {
      const uint64_t h = HashBytes(x.row(i), NumFeatures() * sizeof(float), seed_);
      out[i].seconds = 1.0 + static_cast<double>(h >> 11) * 0x1.0p-53;  // in [1, 2)
      out[i].composed = out[i].seconds;
    }
    return out;
  }

  // Never stored: a job without the model trains none.
  std::string Serialize() const override { return {}; }

 private:
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<CostModel> MakeUnguidedModel(uint64_t seed) {
  return std::make_unique<UnguidedModel>(seed);
}

}  // namespace fusetune::cost_model
