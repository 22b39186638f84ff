// YamlDocument: one YAML document loaded with libyaml (the C parser Ruby's
// Psych uses, so a file reads here as Sidekiq reads it), and YamlNode, a
// read-only view of its nodes with their lines. Owns libyaml's parser and
// document and frees both on every path.
//
// Aliases are resolved by libyaml (an alias is the node it names); tags are
// not: every scalar is its text, and an empty or `~`/`null` plain scalar is
// null.
//
// Thread safety: a document and its nodes are read on one thread.

#ifndef RELIABLEQ_CLI_YAML_DOCUMENT_H_
#define RELIABLEQ_CLI_YAML_DOCUMENT_H_

#include <yaml.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reliableq/status.h"

namespace reliableq::cli {

class YamlDocument;

// The deepest nesting of collections a document may have; a config file
// needs four levels.
inline constexpr int kMaxYamlDepth = 64;

class YamlNode {
 public:
  bool IsNull() const;
  bool IsScalar() const { return node_ != nullptr && node_->type == YAML_SCALAR_NODE; }
  bool IsSequence() const { return node_ != nullptr && node_->type == YAML_SEQUENCE_NODE; }
  bool IsMapping() const { return node_ != nullptr && node_->type == YAML_MAPPING_NODE; }
  // A scalar's text; empty for other nodes.
  std::string Scalar() const;
  // 1-based; 0 for the absent node of an empty document.
  int Line() const { return node_ != nullptr ? static_cast<int>(node_->start_mark.line) + 1 : 0; }
  // A sequence's items; empty for other nodes.
  std::vector<YamlNode> Items() const;
  // A mapping's key/value pairs, in the file's order; empty for other nodes.
  std::vector<std::pair<YamlNode, YamlNode>> Pairs() const;

 private:
  friend class YamlDocument;
  YamlNode(yaml_document_t* document, yaml_node_t* node) : document_(document), node_(node) {}
  YamlNode Node(int index) const;

  yaml_document_t* document_;
  yaml_node_t* node_;  // null: an empty document's root
};

class YamlDocument {
 public:
  // The first document of `text`. A second document is an error, as is
  // anything libyaml refuses: kInvalidArgument "LINE: not YAML: <problem>",
  // and collections nested deeper than kMaxYamlDepth: "LINE: nested deeper
  // than 64 levels", as soon as the parser reaches that depth.
  static Result<std::unique_ptr<YamlDocument>> Load(std::string_view text);
  ~YamlDocument();
  YamlDocument(const YamlDocument&) = delete;
  YamlDocument& operator=(const YamlDocument&) = delete;

  // Null (IsNull) for a file with no content but comments.
  YamlNode Root();

 private:
  YamlDocument() = default;
  yaml_parser_t parser_{};
  yaml_document_t document_{};
  bool parser_ready_ = false;
  bool document_ready_ = false;
};

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_YAML_DOCUMENT_H_
