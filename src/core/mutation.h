// Mutation points: in a build with KVFOLD_MUTATIONS defined (the sanitizer
// test build), setting KVFOLD_MUTATION=<name> in the environment disables
// one correctness step at run time, so scripts/mutations.sh can show that a
// test fails without it, one run per mutation and no rebuild. In product
// builds KVFOLD_MUTANT(name) is the constant false and costs nothing.

#ifndef KVFOLD_CORE_MUTATION_H_
#define KVFOLD_CORE_MUTATION_H_

namespace kvfold::core {

// True when KVFOLD_MUTATION names `name`. Aborts on an unknown name so a
// typo in the runner cannot pass for a caught mutant.
bool MutationActive(const char* name);

}  // namespace kvfold::core

#ifdef KVFOLD_MUTATIONS
#define KVFOLD_MUTANT(name) (::kvfold::core::MutationActive(name))
#else
#define KVFOLD_MUTANT(name) false
#endif

#endif  // KVFOLD_CORE_MUTATION_H_
