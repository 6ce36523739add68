// Prompt lookup: the longest recurring suffix wins, then its most recent occurrence; proposals
// stop at max_tokens and at the end of the known tokens; nothing recurs, nothing is proposed.
#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

namespace pagoda::spec {
namespace {

using Tokens = std::vector<std::int32_t>;

TEST(NgramProposerTest, ProposesWhatFollowedTheSuffixEarlier) {
  const NgramProposer proposer(2, 4);
  //                  a  b  c  d  e  f  g  a  b  c  <- suffix "a b c" recurs at 0
  const Tokens tokens = {1, 2, 3, 4, 5, 6, 7, 1, 2, 3};
  EXPECT_EQ(proposer.lookup(tokens, 3), (Tokens{4, 5, 6}));
  EXPECT_EQ(proposer.lookup(tokens, 1), (Tokens{4}));
}

TEST(NgramProposerTest, LongestSuffixBeatsAMoreRecentShorterOne) {
  const NgramProposer proposer(2, 3);
  // "8 2 3" recurs at 0 (-> 4); "2 3" alone recurs more recently at 5 (-> 9).
  const Tokens tokens = {8, 2, 3, 4, 0, 2, 3, 9, 8, 2, 3};
  EXPECT_EQ(proposer.lookup(tokens, 1), (Tokens{4}));
}

TEST(NgramProposerTest, MostRecentOccurrenceWins) {
  const NgramProposer proposer(2, 2);
  const Tokens tokens = {5, 6, 1, 0, 5, 6, 2, 0, 5, 6};
  EXPECT_EQ(proposer.lookup(tokens, 2), (Tokens{2, 0}));
}

TEST(NgramProposerTest, ProposalStopsAtTheEndOfTheKnownTokens) {
  const NgramProposer proposer(1, 2);
  // "7 7": the suffix "7 7" recurs at 1 and only one token (7) follows before the suffix.
  const Tokens tokens = {1, 7, 7, 7};
  EXPECT_EQ(proposer.lookup(tokens, 4), (Tokens{7}));
}

TEST(NgramProposerTest, NoRecurringSuffixNoProposal) {
  const NgramProposer proposer(2, 4);
  EXPECT_TRUE(proposer.lookup(Tokens{1, 2, 3, 4, 5, 6}, 4).empty());
  EXPECT_TRUE(proposer.lookup(Tokens{1}, 4).empty());
  EXPECT_TRUE(proposer.lookup(Tokens{}, 4).empty());
  EXPECT_TRUE(proposer.lookup(Tokens{1, 2, 1, 2}, 0).empty());
}

TEST(NgramProposerTest, BatchProposalsAlignWithRequests) {
  NgramProposer proposer(2, 2);
  const Tokens hit = {1, 2, 3, 1, 2};
  const Tokens miss = {1, 2, 3, 4};
  SamplingParams params;
  const std::vector<ProposalRequest> requests = {{0, hit, 2, &params}, {1, miss, 2, &params}};
  std::vector<Proposal> proposals;
  proposer.propose(requests, proposals);
  ASSERT_EQ(proposals.size(), 2u);
  EXPECT_EQ(proposals[0].token_ids, (Tokens{3, 1}));
  EXPECT_TRUE(proposals[0].probs.empty());
  EXPECT_TRUE(proposals[1].token_ids.empty());
}

}  // namespace
}  // namespace pagoda::spec
